"""The "startup" figure of tests/bench/run.py: how long statectl takes to start and do almost nothing,
against ``python -c pass`` measured in the same rounds (the interpreter's own start on this machine at
this moment; the ratio is what carries from one machine state to another).

    .venv/bin/python -m tests.bench.run --only startup
    .venv/bin/python -m tests.bench.startup --runs 40

Timed, each a whole process, interleaved round by round, the order rotated every round: ``python -c
pass``, ``statectl --version``, ``statectl --help``, and a restore of a tiny store (6 files, 110 KiB) from
a ``file://`` blob store into an empty dir. Targets: --version under 0.12 s and the tiny restore under
0.2 s (medians).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from tests.bench.measure import Sample, run_measured, stat

VERSION_TARGET_S = 0.12
RESTORE_TARGET_S = 0.2


def _tiny_blobstore(work: Path, statectl: str, env: dict[str, str]) -> str:
    """A file:// blob store holding one snapshot of a 100-key store (job j, store store)."""
    store = work / "tiny-state" / "store" / "Partition_0"
    subprocess.run([sys.executable, "-m", "tests.tools.genstore", str(store), "--keys", "100"], check=True, env=env,
                   cwd=Path(__file__).resolve().parents[2])
    bs = work / "tiny-bs"
    bs.mkdir()
    subprocess.run([statectl, "-q", "backup", "--store-dir", str(store), "--blobstore", f"file://{bs}", "--job", "j",
                    "--store", "store"], check=True, env=env, stdout=subprocess.DEVNULL)
    return f"file://{bs}"


def measure(statectl: str, env: dict[str, str], work: Path, runs: int) -> dict[str, Any]:
    """Every command ``runs`` times, interleaved; medians, ranges and ratios against ``python -c pass``."""
    work.mkdir(parents=True, exist_ok=True)
    blobstore = _tiny_blobstore(work, statectl, env)
    target = work / "tiny-restore"
    commands = {
        "python_pass": [sys.executable, "-c", "pass"],
        "version": [statectl, "--version"],
        "help": [statectl, "--help"],
        "tiny_restore": [statectl, "-q", "restore", "--blobstore", blobstore, "--job", "j", "--store", "store",
                         "--store-dir", str(work / "none" / "Partition_0"), "--target-dir", str(target)],
    }
    samples: dict[str, list[Sample]] = {k: [] for k in commands}
    keys = list(commands)
    for r in range(runs):
        for key in keys[r % len(keys):] + keys[:r % len(keys)]:
            samples[key].append(run_measured(commands[key], env=env, cwd=work / "cwd"))
            shutil.rmtree(target, ignore_errors=True)
    base = stat([x.wall_s for x in samples["python_pass"]]).median
    out: dict[str, Any] = {"runs": runs}
    for key, ss in samples.items():
        st = stat([x.wall_s for x in ss])
        out[key] = {"wall_s": st.to_json(4), "ratio_to_python": round(st.median / base, 2),
                    "cpu_s": stat([x.cpu_s for x in ss]).to_json(4)}
    return out


def add_figures(res: dict[str, Any], add: Callable[..., None], fmt: Callable[[dict[str, Any]], str]) -> None:
    """The figures of the run.py table (``add`` and ``fmt`` are run.figures' own)."""
    py = res["python_pass"]["wall_s"]
    for key, name, target in (("version", "statectl --version, wall", VERSION_TARGET_S),
                              ("tiny_restore", "restore of a 110 KiB store (file://), wall", RESTORE_TARGET_S)):
        w = res[key]["wall_s"]
        add("1b", name, w["median"], fmt(w), "python -c pass", py["median"], fmt(py), f"< {target:.2f} s",
            w["median"] < target)


def report_lines(res: dict[str, Any]) -> list[str]:
    base = res["python_pass"]["wall_s"]["median"]
    cpu = res["python_pass"].get("cpu_s", {}).get("median")
    lines = [f"start-up ({res['runs']} interleaved runs each; python -c pass {base * 1000:.0f} ms"
             + (f", {cpu * 1000:.0f} ms CPU" if cpu is not None else "") + "; CPU = user + sys, what load changes least):"]
    for key, label, target in (("version", "statectl --version", VERSION_TARGET_S), ("help", "statectl --help", None),
                               ("tiny_restore", "restore of a 110 KiB store (file://)", RESTORE_TARGET_S)):
        w = res[key]["wall_s"]
        verdict = "" if target is None else (f"; target < {target:.2f} s: "
                                             + ("ok" if w["median"] < target else "MISSED"))
        c = res[key].get("cpu_s")
        lines.append(f"  {label:<40} {w['median'] * 1000:6.0f} ms [{w['min'] * 1000:.0f}-{w['max'] * 1000:.0f}], "
                     f"{res[key]['ratio_to_python']:.2f}x python -c pass"
                     + (f", CPU {c['median'] * 1000:.0f} ms" if c else "") + verdict)
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.bench.startup", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=30)
    a = p.parse_args(argv)
    statectl = str(Path(sys.executable).parent / "statectl")
    env = {k: v for k, v in os.environ.items() if not k.startswith("STATECTL_") and k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    with tempfile.TemporaryDirectory(prefix="statectl-startup-") as tmp:
        res = measure(statectl, env, Path(tmp), a.runs)
    print("\n".join(report_lines(res)))
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
