"""Where the suite's CPU goes: ``pytest -p tests.tools.cpureport --cpu-report DIR`` (make test-cpu-report).

The suite is CPU-bound on 2 cores under pytest-xdist, so its wall time is about its CPU time over the
cores: a test's wall time says little about what it costs the others. Every worker appends one JSON line
per test to ``DIR/tests-<pid>.jsonl`` as it finishes (a killed run keeps what it measured): the node id,
wall seconds, the worker's own CPU seconds and its reaped subprocesses' (statectl runs, spark-submit's JVM,
pipeline containers). ``python -m tests.tools.cpureport DIR`` sums them by file, heaviest first, with the
workers' own overhead (collection, server starts) and the whole run's CPU.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cpu-report", metavar="DIR", default=None,
                     help="append each test's wall and CPU seconds (own and subprocesses') to DIR/tests-<pid>.jsonl")


def _cpu() -> tuple[float, float]:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    out = item.config.getoption("--cpu-report")
    if not out:
        yield
        return
    (own0, kids0), t0 = _cpu(), time.monotonic()
    yield
    own1, kids1 = _cpu()
    row = {"id": item.nodeid, "wall": time.monotonic() - t0, "own": own1 - own0, "children": kids1 - kids0}
    _append(Path(out), row)


def pytest_unconfigure(config: pytest.Config) -> None:
    # After the session: a worker's servers are stopped (reaped), and the controller's workers have exited.
    out = config.getoption("--cpu-report", None)
    if out:
        own, kids = _cpu()
        _append(Path(out), {"id": "<session>", "own": own, "children": kids,
                            "controller": not hasattr(config, "workerinput")})


def _append(out: Path, row: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / f"tests-{os.getpid()}.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")


def report(out: Path, top: int = 40) -> str:
    """The text of a run's report: CPU by test file, heaviest first, then the totals."""
    by_file: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    tests_cpu = overhead = whole = 0.0
    for path in sorted(out.glob("tests-*.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        measured = [r for r in rows if r["id"] != "<session>"]
        for r in measured:
            v = by_file[r["id"].split("::")[0]]
            v[0] += 1
            v[1] += r["wall"]
            v[2] += r["own"]
            v[3] += r["children"]
        tests_cpu += sum(r["own"] + r["children"] for r in measured)
        for s in (r for r in rows if r["id"] == "<session>"):
            if s.get("controller"):
                whole = s["own"] + s["children"]
            else:
                overhead += s["own"] + s["children"] - sum(r["own"] + r["children"] for r in measured)
    lines = [f"{'tests':>5} {'wall s':>8} {'own s':>7} {'subproc s':>9}  file"]
    for name, (n, wall, own, kids) in sorted(by_file.items(), key=lambda kv: -(kv[1][2] + kv[1][3]))[:top]:
        lines.append(f"{int(n):5d} {wall:8.1f} {own:7.1f} {kids:9.1f}  {name}")
    lines.append(f"CPU in tests {tests_cpu:.0f} s; workers outside tests (collection, servers) {overhead:.0f} s; "
                 f"whole run {whole:.0f} s" if whole else f"CPU in tests {tests_cpu:.0f} s")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(Path(sys.argv[1])))
