"""tests/tools/cpureport.py: a real pytest run (a subprocess) with the plugin records each test's CPU, its
subprocesses' included, and the report sums them by file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.tools.cpureport import report


def test_each_test_s_cpu_and_its_subprocesses_are_recorded_and_summed_by_file(tmp_path: Path):
    (tmp_path / "test_busy.py").write_text(
        "import subprocess, sys\n"
        "def test_child():\n"
        "    subprocess.run([sys.executable, '-c', 'sum(range(30_000_000))'], check=True)\n"
        "def test_own():\n"
        "    sum(range(30_000_000))\n")
    out = tmp_path / "report"
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.tools.cpureport", "--cpu-report", str(out),
                        "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path / "test_busy.py")],
                       capture_output=True, text=True, cwd=Path(__file__).parents[3], timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = {r["id"].split("::")[-1]: r for f in out.glob("tests-*.jsonl")
            for r in map(json.loads, f.read_text().splitlines())}
    assert rows["test_child"]["children"] > 0.2 and rows["test_child"]["own"] < rows["test_child"]["children"]
    assert rows["test_own"]["own"] > 0.2 and rows["test_own"]["children"] == 0
    assert rows["<session>"]["controller"] is True
    text = report(out)
    assert "test_busy.py" in text.splitlines()[1] and "whole run" in text
