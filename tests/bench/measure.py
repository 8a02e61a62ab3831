"""Whole-process measurements: wall time, peak RSS and CPU time of one child process, and summaries.

Peak RSS and CPU come from ``os.wait4`` (the kernel's rusage of the reaped child, the same numbers
``/usr/bin/time -v`` prints: ru_maxrss in KiB on Linux). For a ``sh -c`` wrapper, rusage covers the
shell and every child it waited for (max RSS is the largest of them, CPU the sum).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence


class BenchError(RuntimeError):
    """A benchmarked command failed (the message carries its stderr tail) or a precondition is unmet."""


@dataclass
class Sample:
    """One run of one command."""

    wall_s: float
    max_rss_kib: int
    user_s: float
    sys_s: float
    returncode: int
    stdout: str = field(repr=False, default="")
    stderr: str = field(repr=False, default="")
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.sys_s

    @property
    def max_rss_mb(self) -> float:
        return self.max_rss_kib * 1024 / 1e6

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("stdout")
        d.pop("stderr")
        d["cpu_s"] = round(self.cpu_s, 3)
        d["max_rss_mb"] = round(self.max_rss_mb, 1)
        d["wall_s"] = round(self.wall_s, 4)
        return d


def run_measured(cmd: Sequence[str], *, env: dict[str, str], cwd: Path, timeout: float = 3600.0,
                 check: bool = True) -> Sample:
    """Run ``cmd`` to completion; return its wall time (spawn to reap), peak RSS and CPU time.

    stdout and stderr go to files (never pipes a reader has to drain while timing). With ``check`` a
    non-zero exit raises BenchError naming the command and the tail of its stderr.
    """
    cwd.mkdir(parents=True, exist_ok=True)
    out_path, err_path = cwd / ".last-stdout", cwd / ".last-stderr"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, cwd=cwd)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, ru = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: keep Popen from waiting again
    sample = Sample(wall_s=wall, max_rss_kib=ru.ru_maxrss, user_s=ru.ru_utime, sys_s=ru.ru_stime,
                    returncode=proc.returncode,
                    stdout=out_path.read_text(errors="replace"), stderr=err_path.read_text(errors="replace"))
    if check and sample.returncode != 0:
        tail = "\n".join(sample.stderr.strip().splitlines()[-20:])
        raise BenchError(f"command failed with exit code {sample.returncode}: {' '.join(map(str, cmd))}\n{tail}")
    return sample


@dataclass
class Stat:
    median: float
    min: float
    max: float
    n: int

    def to_json(self, digits: int = 3) -> dict[str, Any]:
        return {"median": round(self.median, digits), "min": round(self.min, digits),
                "max": round(self.max, digits), "n": self.n}


def stat(values: Sequence[float]) -> Stat:
    if not values:
        raise ValueError("no values")
    return Stat(statistics.median(values), min(values), max(values), len(values))


def summarize(samples: Sequence[Sample]) -> dict[str, Any]:
    """Median / min / max of wall time, peak RSS and CPU, plus every sample, for the JSON report."""
    out = {
        "runs": len(samples),
        "wall_s": stat([s.wall_s for s in samples]).to_json(),
        "max_rss_mb": stat([s.max_rss_mb for s in samples]).to_json(1),
        "cpu_s": stat([s.cpu_s for s in samples]).to_json(),
    }
    server = [s.extra["server_cpu_s"] for s in samples if "server_cpu_s" in s.extra]
    if server:
        out["server_cpu_s"] = stat(server).to_json()
    out["samples"] = [s.to_json() for s in samples]
    return out
