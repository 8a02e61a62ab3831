"""The page-views example job (examples/pageviews) with a count stage whose ``on_drain`` first sleeps
``SLOW_DRAIN_S`` seconds: a drain callback that overruns ``task.callback.drain.timeout.ms``. Its coordinator
gives up after ``SLOW_DRAIN_RESTARTS`` restarts of a stage (default: the pipeline's RESTART_LIMIT), so that a
test of a container that always fails starts it a few times, not eleven."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
_spec = importlib.util.spec_from_file_location("pageviews_job", ROOT / "examples" / "pageviews" / "job.py")
pageviews = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pageviews)

from statectl.pipeline import main, runner  # noqa: E402

runner.RESTART_LIMIT = int(os.environ.get("SLOW_DRAIN_RESTARTS", runner.RESTART_LIMIT))


class SlowCount(pageviews.Count):
    def on_drain(self, out):
        time.sleep(float(os.environ.get("SLOW_DRAIN_S", "0")))
        super().on_drain(out)


JOB = replace(pageviews.JOB, stages=tuple(replace(s, task=SlowCount) if s.name == "count" else s
                                          for s in pageviews.JOB.stages))

if __name__ == "__main__":
    sys.exit(main(JOB))
