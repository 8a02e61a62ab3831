"""page-views: a two-stage Samza-style job on statectl.pipeline, to drain.

    page-views-raw (source, 4 partitions): JSON lines {"page": .., "user": .., "ts": <epoch ms>}
      -> stage "parse" (one task per source partition): parses, drops malformed lines, re-keys by page
    page-views-1-partition_by-by-page (intermediate, 3 partitions)
      -> stage "count" (one task per intermediate partition): per page, tumbling windows of WINDOW_MS of
         event time in its RocksDB store "counts" (changelog page-views-1-counts-changelog), fired when
         processing time passes their end plus LATENESS_MS, or all at once on a drain; every pane fired
         goes to the output topic; the store keeps each page's running total too
    page-view-counts (output): JSON {"page": .., "window_start": .., "count": ..}

Run it (see README.md here): python examples/pageviews/job.py run --kafka HOST:PORT --state-dir DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from a checkout without installing

from statectl.pipeline import JobSpec, StageSpec, main  # noqa: E402

SOURCE = "page-views-raw"
INTERMEDIATE = "page-views-1-partition_by-by-page"
OUTPUT = "page-view-counts"
WINDOW_MS = 2_000
LATENESS_MS = 1_000


class Parse:
    """Stage 1: parse and re-key by page."""

    def __init__(self, ctx):
        self.ctx = ctx

    def process(self, msg, out):
        try:
            event = json.loads(msg.value)
            page = str(event["page"])
            ts = int(event.get("ts", msg.timestamp_ms))
        except (ValueError, TypeError, KeyError):
            return  # a malformed page view is dropped
        out.send(INTERMEDIATE, json.dumps({"page": page, "ts": ts}).encode(), key=page.encode())


class Count:
    """Stage 2: windowed counts per page in the store "counts".

    Keys: ``pane/<window start, 13 digits>/<page>`` -> the count of an open pane (deleted when it fires);
    ``total/<page>`` -> the page's count over all time."""

    def __init__(self, ctx):
        self.store = ctx.stores["counts"]

    def process(self, msg, out):
        event = json.loads(msg.value)
        page, ts = event["page"], int(event["ts"])
        start = ts - ts % WINDOW_MS
        for key in (f"pane/{start:013d}/{page}".encode(), f"total/{page}".encode()):
            self.store.put(key, str(int(self.store.get(key) or b"0") + 1).encode())

    def _fire(self, out, until_ms):
        for key, value in list(self.store.items(b"pane/")):
            _, start, page = key.decode().split("/", 2)
            if int(start) + WINDOW_MS > until_ms:
                continue
            out.send(OUTPUT, json.dumps({"page": page, "window_start": int(start), "count": int(value)}).encode(),
                     key=page.encode())
            self.store.delete(key)

    def window(self, out, now_ms):
        self._fire(out, now_ms - LATENESS_MS)

    def on_watermark(self, watermark_ms, out):
        self._fire(out, watermark_ms)

    def on_drain(self, out):
        self._fire(out, 2 ** 63 - 1)


JOB = JobSpec(
    name="page-views",
    stages=(
        StageSpec("parse", Parse, inputs=(SOURCE,), intermediate_outputs=(INTERMEDIATE,)),
        StageSpec("count", Count, inputs=(INTERMEDIATE,), outputs=(OUTPUT,), stores=("counts",)),
    ),
    intermediate={INTERMEDIATE: 3},
    commit_interval_s=2.0,
    drain_poll_interval_s=0.5,
)

if __name__ == "__main__":
    sys.exit(main(JOB))
