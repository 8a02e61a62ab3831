"""For tests that gc with a zero grace and expect every unreferenced blob gone: wait until the newest
object of the store is older than its modification-time grain (S3 reports whole seconds; gc keeps what
may have been written after it started: engine/gc.py)."""

from __future__ import annotations

import time


def past_mtime_grain(bs) -> None:
    grain = getattr(bs, "mtime_grain_s", 0.0)
    if not grain:
        return
    newest = max((i.modified_at for i in bs.list("")), default=0.0)
    delay = newest + grain + 0.02 - time.time()
    if delay > 0:
        time.sleep(delay)
