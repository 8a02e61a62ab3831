"""Peak memory of ``statectl gc`` over a file:// store of many unreferenced blobs (figure 7 of ``make bench``).

    .venv/bin/python -m tests.bench.gcmem [--blobs 100000,1000000] [--compare-with DIR [--compare-label NAME]]

The store holds one real snapshot (a small RocksDB store backed up with ``statectl backup``) and N
unreferenced 100-byte blobs past the one-minute minimum grace, which ``statectl gc --grace 1m`` deletes.
Each gc is a whole process (``python -m statectl``, timed from spawn to reap). Its peak RSS is the VmHWM
the process reads from /proc/self/status as it exits, not wait4's ru_maxrss: the kernel folds the memory
of the process that forked the child, as it was before the exec, into ru_maxrss, so that a child smaller
than this harness (SeaweedFS clients, rocksdict loaded) would show the harness's size. ru_maxrss is kept
in the JSON as ``ru_maxrss_mb``. A run with no unreferenced blob gives the fixed cost (interpreter, imports).

The blobs are made directly on disk, as ``blobs/<xx>/<32 hex>``, and as hard links to one backdated file
per dir: a link takes no inode (a million blobs as files would take a million of the filesystem's inodes;
``df -i``), only a directory entry of about 50 bytes, and a few microseconds to make. ext4 allows 65 000
links per inode, so a fresh file starts every LINKS_PER_FILE links.

``--compare-with DIR`` also measures the statectl package found in DIR (run with PYTHONPATH=DIR), e.g. the
last commit's: ``git archive HEAD statectl | tar -x -C /tmp/base``, for before/after figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from tests.bench.measure import BenchError, run_measured

ROOT = Path(__file__).resolve().parents[2]
LINKS_PER_FILE = 60_000
BLOB_BYTES = 100
AGE_S = 2 * 3600  # well past the grace gc is given (1m)
JOB, STORE = "gcbench", "s"


# ``python -c CHILD args...`` is ``python -m statectl args...`` that writes its VmHWM (KiB) to $GCMEM_HWM_FILE
# at exit (atexit runs after the CLI's SystemExit too).
CHILD = """
import atexit, os, runpy, sys

def _hwm():
    with open("/proc/self/status") as f:
        kib = next(line.split()[1] for line in f if line.startswith("VmHWM:"))
    with open(os.environ["GCMEM_HWM_FILE"], "w") as out:
        out.write(kib)

atexit.register(_hwm)
sys.argv = ["statectl", *sys.argv[1:]]
runpy.run_module("statectl", run_name="__main__", alter_sys=True)
"""


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] [gc] {msg}", file=sys.stderr, flush=True)


def make_blobs(root: Path, n: int, *, seed: int = 7) -> float:
    """Create ``n`` unreferenced data blobs (no TTL) under ``root/blobs``, modified AGE_S ago; return the
    seconds it took."""
    t0 = time.monotonic()
    rng = random.Random(seed)
    old = time.time() - AGE_S
    blobs = root / "blobs"
    sources: dict[str, tuple[str, int]] = {}  # dir -> (file to link to, links made to it)
    for _ in range(n):
        name = f"{rng.getrandbits(128):032x}"
        d = name[:2]
        path = f"{blobs}/{d}/{name}"
        src = sources.get(d)
        if src is None or src[1] >= LINKS_PER_FILE:
            os.makedirs(f"{blobs}/{d}", exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                os.write(fd, b"x" * BLOB_BYTES)
            finally:
                os.close(fd)
            os.utime(path, (old, old))  # every link to it shares the inode, so its mtime
            sources[d] = (path, 1)
        else:
            os.link(src[0], path)
            sources[d] = (src[0], src[1] + 1)
    return time.monotonic() - t0


def count_files(path: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(path))


class GcMemory:
    """Runs the measurements in ``work`` with the statectl package found in ``pythonpath``."""

    def __init__(self, work: Path, env: dict[str, str]):
        self.work = work
        self.env = env
        self.store = work / "state" / STORE / "Partition_0"

    def _env(self, pythonpath: Path) -> dict[str, str]:
        env = {k: v for k, v in self.env.items() if not k.startswith(("STATECTL_", "AWS_"))}
        # The package under test first; tests/ (the store generator) from this checkout after it.
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([str(pythonpath), str(ROOT)]))
        env.update(XDG_CONFIG_HOME=str(self.work / "xdg" / "config"), XDG_DATA_HOME=str(self.work / "xdg" / "data"),
                   CI="1")
        return env

    def _statectl(self, pythonpath: Path, *args: str) -> Any:
        """Run statectl; the Sample's ``extra["hwm_kib"]`` is its own peak RSS (module doc)."""
        cwd = self.work / "cwd"  # not a dir holding a statectl package: ``python -c`` puts the cwd first
        cwd.mkdir(parents=True, exist_ok=True)
        hwm = cwd / ".hwm"
        hwm.unlink(missing_ok=True)
        env = {**self._env(pythonpath), "GCMEM_HWM_FILE": str(hwm)}
        sample = run_measured([sys.executable, "-c", CHILD, *args], env=env, cwd=cwd, timeout=3 * 3600)
        sample.extra["hwm_kib"] = int(hwm.read_text())
        return sample

    def run(self, n: int, pythonpath: Path, label: str) -> dict[str, Any]:
        """One gc over a fresh store of ``n`` unreferenced blobs plus one snapshot's."""
        if not self.store.exists():
            from tests.tools.genstore import make_store

            make_store(self.store, 2000, 1024, seed=1, sst_mb=1)
        root = self.work / f"blobs-{label}-{n}"
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)  # an existing blob store: the statectl measured may predate backup --create
        url = f"file://{root}"
        self._statectl(pythonpath, "backup", "--blobstore", url, "--job", JOB, "--store", STORE,
                       "--store-dir", str(self.store), "-q")
        referenced = count_files(root / "blobs")
        made_s = make_blobs(root, n)
        log(f"{label}: {n} blobs made in {made_s:.1f}s ({referenced} referenced); gc")
        sample = self._statectl(pythonpath, "gc", "--blobstore", url, "--grace", "1m", "-q", "-o", "json")
        result = json.loads(sample.stdout)
        left = count_files(root / "blobs")
        shutil.rmtree(root, ignore_errors=True)
        for d in self.store.parent.glob(self.store.name + "-*"):  # the backup's checkpoint dirs
            shutil.rmtree(d, ignore_errors=True)
        if result["blobs_deleted"] != n or left != referenced:
            raise BenchError(f"{label} gc of {n} blobs deleted {result['blobs_deleted']} and left {left} "
                             f"(expected {n} and the {referenced} referenced)")
        out = {"variant": label, "blobs": n, "referenced": referenced, "wall_s": round(sample.wall_s, 2),
               "max_rss_mb": round(sample.extra["hwm_kib"] * 1024 / 1e6, 1),
               "ru_maxrss_mb": round(sample.max_rss_mb, 1), "cpu_s": round(sample.cpu_s, 2),
               "blobs_deleted": result["blobs_deleted"], "blobs_kept": result["blobs_kept"], "make_s": round(made_s, 1)}
        log(f"{label}: gc of {n} blobs: {out['wall_s']}s, peak RSS {out['max_rss_mb']} MB")
        return out

    def close(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)


def check_disk(work: Path, blobs: list[int]) -> None:
    """Enough directory space and a few inodes (the blobs themselves need none) for the largest run."""
    work.mkdir(parents=True, exist_ok=True)
    need = max(blobs, default=0) * 64 + 512 * 1024 ** 2
    free = shutil.disk_usage(work).free
    if free < need:
        raise BenchError(f"gc memory: {free >> 20} MiB free in {work}, need about {need >> 20} MiB")
    st = os.statvfs(work)
    if st.f_favail and st.f_favail < 10_000:
        raise BenchError(f"gc memory: only {st.f_favail} inodes free in {work}")


def bench(work: Path, env: dict[str, str], blobs: list[int],
          variants: list[tuple[str, Path]] | None = None) -> dict[str, Any]:
    """Peak RSS and wall time of gc at 0 and each of ``blobs`` unreferenced blobs, for each (label, dir
    holding a statectl package) of ``variants`` (default: this checkout, as "current")."""
    variants = variants or [("current", ROOT)]
    check_disk(work, blobs)
    g = GcMemory(work, env)
    runs: list[dict[str, Any]] = []
    try:
        for n in [0, *blobs]:
            for label, path in variants:
                runs.append(g.run(n, path, label))
    finally:
        g.close()
    report: dict[str, Any] = {"runs": runs, "blobs": blobs, "variants": [label for label, _ in variants]}
    for label, _ in variants:
        mine = {r["blobs"]: r for r in runs if r["variant"] == label}
        if len(blobs) >= 2:
            lo, hi = mine[min(blobs)], mine[max(blobs)]
            report.setdefault("growth", {})[label] = {
                "from": lo["blobs"], "to": hi["blobs"], "rss_mb_from": lo["max_rss_mb"], "rss_mb_to": hi["max_rss_mb"],
                "ratio": round(hi["max_rss_mb"] / lo["max_rss_mb"], 3),
                "bytes_per_blob": round((hi["max_rss_mb"] - lo["max_rss_mb"]) * 1e6 / max(1, hi["blobs"] - lo["blobs"]), 1)}
    return report


def report_lines(rep: dict[str, Any]) -> list[str]:
    lines = ["gc of a file:// store of N unreferenced blobs (plus one small snapshot's), whole process:"]
    for r in rep["runs"]:
        lines.append(f"  {r['variant']:<10} N={r['blobs']:>9,}  peak RSS {r['max_rss_mb']:7.1f} MB  "
                     f"wall {r['wall_s']:8.2f} s  CPU {r['cpu_s']:7.2f} s  deleted {r['blobs_deleted']:,}, "
                     f"kept {r['blobs_kept']}")
    for label, gr in rep.get("growth", {}).items():
        lines.append(f"  {label}: {gr['from']:,} -> {gr['to']:,} blobs: {gr['rss_mb_from']} -> {gr['rss_mb_to']} MB "
                     f"({gr['bytes_per_blob']} bytes per extra blob)")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.bench.gcmem", description=__doc__.split("\n\n")[0])
    p.add_argument("--blobs", default="100000,1000000", help="comma-separated blob counts (default 100000,1000000)")
    p.add_argument("--work", type=Path, default=ROOT / ".bench" / "gcmem")
    p.add_argument("--compare-with", type=Path, help="a dir holding another revision's statectl package")
    p.add_argument("--compare-label", default="base")
    p.add_argument("--only-compare", action="store_true", help="measure only the --compare-with package")
    a = p.parse_args(argv)
    blobs = [int(x.replace("_", "")) for x in a.blobs.split(",") if x.strip()]
    variants = [] if a.only_compare else [("current", ROOT)]
    if a.compare_with:
        if not (a.compare_with / "statectl" / "__init__.py").is_file():
            p.error(f"--compare-with: no statectl package in {a.compare_with}")
        variants.insert(0, (a.compare_label, a.compare_with.resolve()))
    rep = bench(a.work, dict(os.environ), blobs, variants)
    (ROOT / ".bench").mkdir(exist_ok=True)
    (ROOT / ".bench" / "gcmem.json").write_text(json.dumps(rep, indent=2) + "\n")
    print("\n".join(report_lines(rep)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
