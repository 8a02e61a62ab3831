"""statectl benchmarks (``make bench``): backup and restore against rclone and plain boto3, on ONE SeaweedFS
S3 server started here, in one run, so that every ratio is measured on the same machine state.

    .venv/bin/python -m tests.bench.run                  # 1 GiB store, memory comparison at 4 GiB
    .venv/bin/python -m tests.bench.run --quick          # 128 MiB store, 512 MiB for the memory comparison
    .venv/bin/python -m tests.bench.run --size-gib 2 --big-gib 8 --runs 5

Figures (docs/benchmarks.md, with their targets):
  1. a store of random 1 KiB values in ~64 MiB SST files (tests/tools/genstore.py)
 1b. start-up (tests/bench/startup.py): statectl --version, --help and a restore of a 110 KiB store from
     file:// vs python -c pass, interleaved; targets --version < 0.12 s, the tiny restore < 0.2 s
  2. full backup: statectl backup vs rclone copy --transfers 8 vs a parallel boto3 PUT (8 threads), all
     uploading the same files: the RocksDB checkpoint of the store (SSTs + small metadata files)
  3. restore into an empty dir: statectl restore (downloads + CRC32 checks + fsync) vs rclone copy down
 3b. restore-peers (tests/bench/restorebench.py): restore vs a boto3 GET + fsync of each file, at 512 MiB and
     1 GiB, in 64 MiB and in 4 MiB SSTs; target <= 1.0x
  4. incremental backup after adding 5% new keys: bytes uploaded vs the bytes of new files + 1 MiB
  5. restore of the latest snapshot when the identical local checkpoint dir exists (hard links only)
  6. peak RSS of backup and restore, at the base size and at --big-gib (must not grow with the store)
  7. peak RSS of gc over a file:// store of 100 000 and of 1 000 000 unreferenced blobs (must not grow
     with the number of blobs; tests/bench/gcmem.py, which can also measure another revision)
  8. drain (tests/bench/drainbench.py, on a Tansu broker): the example job's throughput, the time from
     'drain start' to 'drain wait' returning with 100 000 messages in flight next to in-flight /
     throughput + one poll interval, and 'drain status' on 64 intermediate partitions
  9. standby (tests/bench/standbybench.py, on a Tansu broker): promote of 1 GiB and 4 GiB replicas with a
     10 000-record tail; the follower's apply rate vs a raw kafka-python read; the time to a promotable
     replica seeded from a snapshot vs bootstrapped from the changelog; 'follow --container' of 3 tasks x 2
     stores vs one raw kafka-python consumer of the same 6 partitions; 'failover --container' of that
     container with 64 MiB and 512 MiB per replica (must be flat, <= 3 s)
 10. adstore (tests/bench/adstorebench.py, on a Tansu broker): 2 M records (16-byte keys, 100-byte values)
     loaded from a topic vs a raw kafka-python consume; the Spark bulk path from Parquet vs the put path
     from the same rows; the ingest step alone; peak RSS of each; 10b. the crossover: the Spark path vs the
     put path at 4 M shuffled, 8 M sorted and 20 M shuffled rows of Parquet, --runs rounds side by side
     (--adstore-sizes picks others); targets >= 1.0x, 1.0x, 1.5x
 11. copy (tests/bench/copybench.py): snapshots copy of the store's snapshot to another bucket of the same
     server vs restore + backup vs rclone copy bucket to bucket: time and bytes through the client
 12. rescale (optional, --only rescale; tests/bench/rescalebench.py): 4 -> 2 and 4 -> 8 tasks of a
     hash-partitioned store of --rescale-keys keys on Spark local[2] vs the obvious script (restore, re-key
     in Python, backup), target <= 0.5x; and 4 -> 8 -> 4 of a key-group store of --size-gib on SeaweedFS
     and file:// (--only rescale-kg)
 13. rate (tests/bench/ratebench.py): backup --limit-rate 20MiB/s of a 256 MiB store vs the ideal 12.8 s
     (bytes uploaded / rate), within 10 %
 14. all-stores (tests/bench/allbench.py): backup --all and restore --all of 50, 100 and 200 stores x 200 keys
     on SeaweedFS: the time per store at each count, linear (largest / smallest count <= 1.1x)

Every timed command is a whole process (wall time from spawn to reap, peak RSS and CPU time from
wait4), run at least --runs times (once when a run takes over --long-s seconds), interleaved with its
peers round by round; the report gives the median, min-max and the ratio of medians against the peer.
Writes a human-readable report to stdout and the JSON report to .bench/results.json. Working data
lives under .bench/work and is removed at the end (unless --keep).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tests.bench.measure import BenchError, Sample, run_measured, stat, summarize
from tests.servers import SeaweedServer

ROOT = Path(__file__).resolve().parents[2]
GiB = 1024 ** 3
MiB = 1024 ** 2
VALUE_SIZE = 1024
JOB, STORE = "bench", "store"
ACCESS_KEY, SECRET_KEY = "benchAK", "benchSK"
PROXY_VARS = {"http_proxy", "https_proxy", "all_proxy", "no_proxy", "ftp_proxy"}
FIGURES = ("backup", "restore", "restore-peers", "incremental", "local", "memory", "gc", "drain", "standby",
           "adstore", "copy", "rate", "rescale", "rescale-kg", "startup", "all-stores")
OPTIONAL = {"rescale", "rescale-kg"}  # run only when --only names them
RCLONE_UP_FLAGS = ["--transfers", "8", "--checkers", "8", "--s3-no-check-bucket"]
RCLONE_DOWN_FLAGS = ["--transfers", "8", "--checkers", "8", "--checksum"]


# ---- settings -------------------------------------------------------------------------------------

@dataclass
class Settings:
    size_bytes: int
    big_bytes: int | None
    sst_mb: int
    runs: int
    long_s: float
    parallelism: int
    incr_fraction: float
    local_runs: int
    bench_dir: Path
    keep: bool
    verify: bool
    quick: bool
    only: set[str]
    gc_blobs: list[int] = field(default_factory=list)
    rescale_keys: int = 2_000_000
    adstore_sizes: str | None = None

    @property
    def work(self) -> Path:
        return self.bench_dir / "work"

    @property
    def keys(self) -> int:
        return keys_for(self.size_bytes)


def keys_for(size_bytes: int) -> int:
    return max(1000, size_bytes // VALUE_SIZE)


def parse_args(argv: list[str] | None) -> Settings:
    p = argparse.ArgumentParser(prog="python -m tests.bench.run", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size-gib", type=float, default=None, help="base store size in GiB (default 1; --quick: 0.125)")
    p.add_argument("--big-gib", type=float, default=None,
                   help="store size for the memory-scaling comparison (default 4; --quick: 0.5; 0 skips it)")
    p.add_argument("--quick", action="store_true", help="a ~128 MiB run for trying the harness out")
    p.add_argument("--sst-mb", type=int, default=None, help="SST file size in MiB (default 64; --quick: 16)")
    p.add_argument("--runs", type=int, default=None, help="runs of each timed command (default 5; --quick: 3)")
    p.add_argument("--long-s", type=float, default=60.0,
                   help="a command whose first run takes longer than this is run only once (default 60)")
    p.add_argument("--parallelism", type=int, default=8, help="transfers in flight, every tool (default 8)")
    p.add_argument("--incremental-pct", type=float, default=5.0, help="new data for the incremental backup, %% of keys")
    p.add_argument("--bench-dir", type=Path, default=ROOT / ".bench", help="working dir and report (default .bench)")
    p.add_argument("--keep", action="store_true", help="keep the generated stores and restores under .bench/work")
    p.add_argument("--no-verify", action="store_true", help="skip the fingerprint check of a restored store")
    p.add_argument("--gc-blobs", default=None, metavar="N,...",
                   help="blob counts for the gc memory figure (default 100000,1000000; --quick: 10000,100000)")
    p.add_argument("--adstore-sizes", default=None, metavar="ROWS:ORDER,...",
                   help="the adstore crossover's cases (default 4M:shuffled,8M:sorted,20M:shuffled; --quick: a tenth)")
    p.add_argument("--only", default="", metavar="FIG,...",
                   help="only these figures: backup, restore (needs backup), restore-peers (restore vs boto3 GET + "
                        "fsync at 512 MiB and 1 GiB, large and small files), incremental, local (needs incremental), "
                        "memory, gc, drain, standby, adstore, copy, rate, rescale, rescale-kg, startup, all-stores (backup "
                        "--all and restore --all at 50, 100, 200 stores); default all but rescale and rescale-kg")
    p.add_argument("--rescale-keys", type=int, default=None,
                   help="keys of the hash-partitioned rescale figure (default 2000000; --quick: 200000)")
    a = p.parse_args(argv)
    size = a.size_gib if a.size_gib is not None else (0.125 if a.quick else 1.0)
    big = a.big_gib if a.big_gib is not None else (0.5 if a.quick else 4.0)
    runs = a.runs if a.runs is not None else (3 if a.quick else 5)
    only = {x.strip() for x in a.only.split(",") if x.strip()} or set(FIGURES) - OPTIONAL
    if only - set(FIGURES):
        p.error(f"--only: unknown figures {sorted(only - set(FIGURES))}; choose from {', '.join(FIGURES)}")
    if "restore" in only:
        only.add("backup")
    if "local" in only:
        only.add("incremental")
    if size <= 0 or runs < 1 or a.parallelism < 1:
        p.error("--size-gib, --runs and --parallelism must be positive")
    return Settings(
        size_bytes=int(size * GiB), big_bytes=int(big * GiB) if big and big > 0 else None,
        sst_mb=a.sst_mb or (16 if a.quick else 64), runs=runs, long_s=a.long_s, parallelism=a.parallelism,
        incr_fraction=a.incremental_pct / 100, local_runs=max(5, runs), bench_dir=a.bench_dir.absolute(),
        keep=a.keep, verify=not a.no_verify, quick=a.quick, only=only,
        gc_blobs=[int(x.replace("_", "")) for x in (a.gc_blobs or ("10000,100000" if a.quick else "100000,1000000"))
                  .split(",") if x.strip()],
        rescale_keys=a.rescale_keys or (200_000 if a.quick else 2_000_000),
        adstore_sizes=a.adstore_sizes,
    )


# ---- small helpers --------------------------------------------------------------------------------

def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def listing(path: Path) -> dict[str, tuple[int, int]]:
    """rel path -> (size, inode) of every regular file under ``path``."""
    out = {}
    for p in sorted(path.rglob("*")):
        if p.is_file() and not p.is_symlink():
            st = p.stat()
            out[p.relative_to(path).as_posix()] = (st.st_size, st.st_ino)
    return out


def file_crc(path: Path) -> int:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(4 * MiB):
            crc = zlib.crc32(chunk, crc)
    return crc


def checkpoint_dirs(store: Path) -> list[Path]:
    """The ``<storeDir>-<checkpointId>`` dirs statectl keeps beside the store."""
    return sorted(p for p in store.parent.glob(store.name + "-*") if p.is_dir())


def tool_version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
        return out.splitlines()[0] if out else "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


def sync_all() -> None:
    """Flush dirty pages so one run's write-back does not land in the next run's time."""
    os.sync()


def drop_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


# ---- the harness ----------------------------------------------------------------------------------

@dataclass
class Variant:
    """One command of a group: ``prepare(run)`` returns the argv (untimed set-up before it), ``after(run,
    sample)`` checks and tidies up (untimed). Extra timed work, e.g. an fsync, goes into sample.extra."""

    key: str
    prepare: Callable[[int], list[str]]
    after: Callable[[int, Sample], None] = lambda run, sample: None
    samples: list[Sample] = field(default_factory=list)


class Bench:
    def __init__(self, s: Settings):
        self.s = s
        self.server: SeaweedServer | None = None
        self.results: dict[str, Any] = {}
        self.statectl = str(Path(sys.executable).parent / "statectl")
        self.python = sys.executable
        self.rclone = shutil.which("rclone")
        self.env: dict[str, str] = {}
        self._buckets: list[str] = []
        self._weed_pid: int | None = None

    # -- environment ------------------------------------------------------------------------------

    def start(self) -> None:
        s = self.s
        if not Path(self.statectl).exists():
            raise BenchError(f"no statectl next to {sys.executable}; run 'make install-dev' first")
        if self.rclone is None and s.only & {"backup", "restore", "memory"}:  # the figures with rclone as a peer
            raise BenchError("rclone is not installed (make bench installs it from Debian: apt-get install rclone)")
        drop_tree(s.work)
        s.work.mkdir(parents=True)
        (s.work / "tmp").mkdir()
        # The server's data dir (and its temp files) under .bench/work too: one disk, cleaned at the end.
        tempfile.tempdir = str(s.work / "tmp")
        log("starting SeaweedFS")
        self.server = SeaweedServer(access_key=ACCESS_KEY, secret_key=SECRET_KEY).start()
        self.env = self._child_env()
        self.results["meta"] = self._meta()

    def _child_env(self) -> dict[str, str]:
        """The environment of every timed command: the user's shell minus anything that could point a
        tool elsewhere (AWS_*, STATECTL_*, RCLONE_*, proxies, config files), plus the server's settings."""
        assert self.server is not None
        # PYTHONDONTWRITEBYTECODE too: an installed statectl runs from bytecode, as the peers' packages do; an
        # editable one without its __pycache__ would compile every module at every start.
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("AWS_", "STATECTL_", "RCLONE_")) and k.lower() not in PROXY_VARS
               and k != "PYTHONDONTWRITEBYTECODE"}
        xdg = self.s.work / "xdg"
        env.update({
            "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_EC2_METADATA_DISABLED": "true", "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
            "XDG_CONFIG_HOME": str(xdg / "config"), "XDG_DATA_HOME": str(xdg / "data"),
            "XDG_CACHE_HOME": str(xdg / "cache"), "CI": "1",
            "PYTHONPATH": str(ROOT),  # the peers and the store generator are modules of tests/ (cwd is elsewhere)
            # rclone entirely from the environment: remote "bench", no config file.
            "RCLONE_CONFIG": str(self.s.work / "rclone-none.conf"),
            "RCLONE_CONFIG_BENCH_TYPE": "s3", "RCLONE_CONFIG_BENCH_PROVIDER": "Other",
            "RCLONE_CONFIG_BENCH_ENDPOINT": self.server.endpoint,
            "RCLONE_CONFIG_BENCH_ACCESS_KEY_ID": ACCESS_KEY, "RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY": SECRET_KEY,
            "RCLONE_CONFIG_BENCH_REGION": "us-east-1",
        })
        return env

    def _meta(self) -> dict[str, Any]:
        s = self.s
        mem = ""
        try:
            mem = next(line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal"))
        except (OSError, StopIteration):
            pass
        from statectl import __version__

        return {
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(), "platform": platform.platform(), "cpus": os.cpu_count(),
            "memory": mem.split(":", 1)[-1].strip(), "python": platform.python_version(),
            "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
            "statectl": __version__, "rclone": tool_version([self.rclone, "version"]) if self.rclone else "-",
            "weed": tool_version([str(Path(sys.executable).parent / "weed"), "version"]),
            "settings": {"size_bytes": s.size_bytes, "big_bytes": s.big_bytes, "sst_mb": s.sst_mb, "runs": s.runs,
                         "figures": sorted(s.only), "gc_blobs": s.gc_blobs,
                         "long_s": s.long_s, "parallelism": s.parallelism, "incremental_fraction": s.incr_fraction,
                         "quick": s.quick},
            "peer_flags": {"rclone_upload": RCLONE_UP_FLAGS, "rclone_download": RCLONE_DOWN_FLAGS,
                           "boto3": f"put_object/get_object per file, {s.parallelism} threads"},
        }

    def server_cpu_s(self) -> float | None:
        """CPU seconds the SeaweedFS process has used so far (it shares the machine's cores with the client)."""
        if self.server is None or self.server.dir is None:
            return None
        if self._weed_pid is None:
            marker = f"-dir={self.server.dir}".encode()
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    if marker in Path(f"/proc/{pid}/cmdline").read_bytes():
                        self._weed_pid = int(pid)
                        break
                except OSError:
                    continue
        if self._weed_pid is None:
            return None
        try:
            fields = Path(f"/proc/{self._weed_pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def cleanup(self) -> None:
        self.stop()
        tempfile.tempdir = None
        if not self.s.keep:
            drop_tree(self.s.work)

    # -- blob store helpers -----------------------------------------------------------------------

    def bucket(self, label: str) -> str:
        assert self.server is not None
        name = f"{label}-{uuid.uuid4().hex[:8]}".lower()
        self.server.make_bucket(name)
        self._buckets.append(name)
        return name

    def bucket_bytes(self, bucket: str) -> tuple[int, int]:
        """(objects, bytes) stored in a bucket."""
        assert self.server is not None
        n = total = 0
        for page in self.server.client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for o in page.get("Contents", []):
                n += 1
                total += o["Size"]
        return n, total

    def drop_bucket(self, bucket: str) -> None:
        """Empty and delete a bucket (SeaweedFS then drops its collection's volumes: the disk comes back)."""
        assert self.server is not None
        c = self.server.client
        try:
            for page in c.get_paginator("list_objects_v2").paginate(Bucket=bucket):
                keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
                if keys:
                    c.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
            c.delete_bucket(Bucket=bucket)
        except Exception as e:  # disk space only; never fail the benchmark for it
            log(f"could not delete bucket {bucket}: {e}")

    # -- commands ---------------------------------------------------------------------------------

    def sc(self, *args: str) -> list[str]:
        assert self.server is not None
        return [self.statectl, "-q", "-o", "json", *args, "--job", JOB, "--store", STORE,
                "--s3-endpoint", self.server.endpoint, "--parallelism", str(self.s.parallelism)]

    def sc_backup(self, store: Path, bucket: str, *extra: str) -> list[str]:
        return self.sc("backup", "--store-dir", str(store), "--blobstore", f"s3://{bucket}/statectl", *extra)

    def sc_restore(self, bucket: str, *extra: str) -> list[str]:
        return self.sc("restore", "--blobstore", f"s3://{bucket}/statectl", *extra)

    def run(self, cmd: list[str], **kw: Any) -> Sample:
        return run_measured(cmd, env=self.env, cwd=self.s.work / "cwd", **kw)

    def gen_store(self, path: Path, keys: int, *, start: int = 0, seed: int = 1) -> Sample:
        path.parent.mkdir(parents=True, exist_ok=True)
        return self.run([self.python, "-m", "tests.tools.genstore", str(path), "--keys", str(keys),
                         "--value-size", str(VALUE_SIZE), "--sst-mb", str(self.s.sst_mb), "--seed", str(seed),
                         "--start", str(start)], timeout=7200)

    def fingerprint(self, path: Path) -> str:
        out = subprocess.run([self.python, "-m", "tests.tools.genstore", "--fingerprint", str(path)], cwd=ROOT,
                             capture_output=True, text=True, env=self.env)
        if out.returncode != 0:
            raise BenchError(f"fingerprint of {path} failed: {out.stderr.strip()[-2000:]}")
        return out.stdout.strip()

    def rounds(self, name: str, variants: list[Variant], runs: int | None = None) -> None:
        """Run each variant ``runs`` times, interleaved round by round (so drift hits every tool alike);
        a variant whose first run took longer than --long-s runs once."""
        runs = runs or self.s.runs
        for r in range(runs):
            for v in variants:
                if r > 0 and v.samples and v.samples[0].wall_s > self.s.long_s:
                    continue
                cmd = v.prepare(r)
                before = self.server_cpu_s()
                sample = self.run(cmd)
                after = self.server_cpu_s()
                if before is not None and after is not None:
                    sample.extra["server_cpu_s"] = round(after - before, 2)
                v.after(r, sample)
                v.samples.append(sample)
                sync_all()
                log(f"{name}: {v.key} run {r + 1}: {sample.wall_s:.2f} s, {sample.max_rss_mb:.0f} MB peak RSS, "
                    f"{sample.cpu_s:.1f} s CPU (server {sample.extra.get('server_cpu_s', '?')} s)")

    # -- the figures ------------------------------------------------------------------------------

    def run_all(self) -> None:
        s = self.s
        store = s.work / "state" / STORE / "Partition_0"
        if s.only - {"gc", "drain", "standby", "adstore", "rate", "rescale", "rescale-kg", "restore-peers", "startup",
                     "all-stores"}:
            self.figure_store(store, s.keys)
        if "backup" in s.only:
            self.figure_backup(store)
        if "restore" in s.only:
            self.figure_restore()
        if "startup" in s.only:
            from tests.bench.startup import measure

            self.results["startup"] = measure(self.statectl, self.env, s.work / "startup", max(20, s.runs * 4))
        if "restore-peers" in s.only:
            from tests.bench.restorebench import figure_restore_peers

            self.results["restore_peers"] = figure_restore_peers(self, (64, 128) if s.quick else (512, 1024))
        if "incremental" in s.only:
            self.figure_incremental(store)
        if "local" in s.only:
            self.figure_local_restore(store)
        if "memory" in s.only:
            self.figure_memory()
        if "gc" in s.only:
            self.figure_gc()
        if "drain" in s.only:
            self.figure_drain()
        if "standby" in s.only:
            self.figure_standby()
        if "adstore" in s.only:
            self.figure_adstore()
        if "copy" in s.only:
            from tests.bench.copybench import figure_copy

            self.results["copy"] = figure_copy(self, store)
        if "rate" in s.only:
            from tests.bench.ratebench import figure_rate

            self.results["rate"] = figure_rate(self)
        if "all-stores" in s.only:
            from tests.bench.allbench import figure_all_stores

            self.results["all_stores"] = figure_all_stores(self, (10, 20, 40) if s.quick else (50, 100, 200),
                                                           runs=min(s.runs, 3))
        if "rescale" in s.only or "rescale-kg" in s.only:
            self.figure_rescale()

    def figure_store(self, store: Path, keys: int) -> None:
        log(f"1. generating {human(keys * VALUE_SIZE)} store: {keys} keys of {VALUE_SIZE} random bytes, "
            f"{self.s.sst_mb} MiB SSTs")
        gen = self.gen_store(store, keys)
        files = listing(store)
        ssts = {k: v for k, v in files.items() if k.endswith(".sst")}
        self.results["store"] = {
            "path": str(store), "keys": keys, "value_size": VALUE_SIZE, "sst_mb": self.s.sst_mb,
            "files": len(files), "bytes": sum(v[0] for v in files.values()), "sst_files": len(ssts),
            "sst_bytes": sum(v[0] for v in ssts.values()),
            "sst_sizes_mib": sorted(round(v[0] / MiB, 1) for v in ssts.values()), "generate_s": round(gen.wall_s, 1),
        }
        if self.s.verify:
            self.results["store"]["fingerprint"] = self.fingerprint(store)

    def figure_backup(self, store: Path) -> None:
        """Full backup: statectl backup (checkpoint + upload), statectl of a ready checkpoint dir (upload
        only), rclone copy and a boto3 PUT of that same checkpoint dir. Every run into a fresh bucket."""
        log("2. full backup: statectl vs rclone copy vs boto3 PUT")
        work = self.s.work
        # A warm-up backup: loads statectl, boto3 and the server, and makes the checkpoint every peer
        # uploads (hard links to the same SSTs, so the page cache is shared by every tool).
        warm = self.bucket("warmup")
        self.run(self.sc_backup(store, warm))
        (cp,) = checkpoint_dirs(store)
        src = work / "upload-src"
        drop_tree(src)
        subprocess.run(["cp", "-al", str(cp), str(src)], check=True)
        src_files = listing(src)
        src_bytes = sum(v[0] for v in src_files.values())
        self.drop_bucket(warm)
        self.results["upload_source"] = {"files": len(src_files), "bytes": src_bytes,
                                         "names": sorted(src_files)}

        buckets: dict[str, list[str]] = {}
        uploaded: dict[str, list[dict[str, int]]] = {}

        def fresh(key: str) -> str:
            # Keep only each tool's latest bucket (the restore figure downloads from it).
            for old in buckets.get(key, []):
                self.drop_bucket(old)
            b = self.bucket(key.replace("_", "-"))
            buckets[key] = [b]
            return b

        def after_upload(key: str) -> Callable[[int, Sample], None]:
            def after(run: int, sample: Sample) -> None:
                b = buckets[key][-1]
                objects, nbytes = self.bucket_bytes(b)
                rec = {"objects": objects, "bytes_on_server": nbytes}
                if key.startswith("statectl"):
                    j = json.loads(sample.stdout)
                    rec.update(bytes_uploaded=j["bytes_uploaded"], files_uploaded=j["files_uploaded"],
                               engine_s=j["duration_s"])
                sample.extra.update(rec)
                uploaded.setdefault(key, []).append(rec)
            return after

        variants = [
            Variant("statectl", lambda r: self.sc_backup(store, fresh("statectl")), after_upload("statectl")),
            Variant("statectl_upload_only",
                    lambda r: self.sc_backup(store, fresh("statectl_upload_only"), "--checkpoint-dir", str(src)),
                    after_upload("statectl_upload_only")),
            Variant("rclone", lambda r: [self.rclone, "copy", str(src), f"bench:{fresh('rclone')}/rclone",
                                         *RCLONE_UP_FLAGS, "-q"], after_upload("rclone")),
            Variant("boto3", lambda r: [self.python, "-m", "tests.bench.s3peer", "put", str(src),
                                        f"s3://{fresh('boto3')}/boto3", "--endpoint", self.server.endpoint,
                                        "--threads", str(self.s.parallelism)], after_upload("boto3")),
        ]
        self.rounds("backup", variants)
        # statectl's runs each left a checkpoint dir; only the newest is kept by statectl itself.
        self.results["backup"] = {
            v.key: {**summarize(v.samples), "uploads": uploaded.get(v.key, [])} for v in variants}
        self.results["backup"]["source_bytes"] = src_bytes
        self.restore_buckets = {k: b[-1] for k, b in buckets.items()}

    def figure_restore(self) -> None:
        """Restore into an empty dir: statectl (no local checkpoint or store to reuse) vs rclone copy down
        vs a boto3 GET; the peers' fsync of what they wrote is timed separately (statectl fsyncs itself)."""
        log("3. restore into an empty dir: statectl vs rclone copy vs boto3 GET")
        work = self.s.work
        targets = work / "restores"
        targets.mkdir(exist_ok=True)
        nostore = work / "no-such-state" / STORE / "Partition_0"
        rb = self.restore_buckets
        downloaded: dict[str, list[int]] = {}

        def target(key: str, run: int) -> Path:
            return targets / f"{key}-{run}"

        def fsync_after(key: str) -> Callable[[int, Sample], None]:
            def after(run: int, sample: Sample) -> None:
                t = target(key, run)
                files = [str(p) for p in sorted(t.rglob("*")) if p.is_file()]
                nbytes = sum(Path(f).stat().st_size for f in files)
                downloaded.setdefault(key, []).append(nbytes)
                sample.extra["bytes_written"] = nbytes
                if key == "statectl":
                    j = json.loads(sample.stdout)
                    sample.extra.update(bytes_downloaded=j["bytes_downloaded"], files_reused=j["files_reused"],
                                        engine_s=j["duration_s"])
                    if j["files_reused"]:
                        raise BenchError(f"statectl restore reused {j['files_reused']} local files: not a download")
                else:
                    fs = self.run(["sync", "--", *files])  # fsync(2) of each file, as statectl does
                    sample.extra["fsync_s"] = fs.wall_s
                if run == self.s.runs - 1 and key == "statectl" and self.s.verify:
                    sample.extra["fingerprint_ok"] = self.fingerprint(t) == self.results["store"]["fingerprint"]
                    log(f"restored store fingerprint matches: {sample.extra['fingerprint_ok']}")
                drop_tree(t)
            return after

        variants = [
            Variant("statectl", lambda r: self.sc_restore(rb["statectl"], "--target-dir", str(target("statectl", r)),
                                                          "--store-dir", str(nostore)), fsync_after("statectl")),
            Variant("rclone", lambda r: [self.rclone, "copy", f"bench:{rb['rclone']}/rclone", str(target("rclone", r)),
                                         *RCLONE_DOWN_FLAGS, "-q"], fsync_after("rclone")),
            Variant("boto3", lambda r: [self.python, "-m", "tests.bench.s3peer", "get", f"s3://{rb['boto3']}/boto3",
                                        str(target("boto3", r)), "--endpoint", self.server.endpoint,
                                        "--threads", str(self.s.parallelism)], fsync_after("boto3")),
        ]
        self.rounds("restore", variants)
        out = {}
        for v in variants:
            out[v.key] = {**summarize(v.samples), "bytes_written": downloaded.get(v.key, [])}
            if v.key != "statectl":
                out[v.key + "_plus_fsync"] = {"wall_s": stat([x.wall_s + x.extra["fsync_s"] for x in v.samples]).to_json()}
        self.results["restore"] = out
        for key in ("statectl_upload_only", "rclone", "boto3"):
            self.drop_bucket(rb.pop(key))

    def figure_incremental(self, store: Path) -> None:
        """A full backup into a fresh chain, 5% new keys, an incremental backup: bytes uploaded vs the
        bytes of the files the new checkpoint has that the previous one had not (+ 1 MiB)."""
        s = self.s
        add = max(1, round(s.keys * s.incr_fraction))
        log(f"4. incremental backup after adding {add} keys ({s.incr_fraction:.0%})")
        chain = self.bucket("chain")
        self.chain_bucket = chain
        base = self.run(self.sc_backup(store, chain))
        base_j = json.loads(base.stdout)
        (cp1,) = [p for p in checkpoint_dirs(store) if p.name.endswith(base_j["checkpoint_id"])]
        before = listing(cp1)
        small_crc = {rel: file_crc(cp1 / rel) for rel, (size, _) in before.items() if size < 64 * MiB}

        gen = self.gen_store(store, add, start=s.keys, seed=2)
        incr = self.run(self.sc_backup(store, chain))
        j = json.loads(incr.stdout)
        (cp2,) = [p for p in checkpoint_dirs(store) if p.name.endswith(j["checkpoint_id"])]
        after = listing(cp2)
        new_files = {}
        for rel, (size, ino) in after.items():
            old = before.get(rel)
            same = old is not None and old[0] == size and (old[1] == ino or (
                rel in small_crc and small_crc[rel] == file_crc(cp2 / rel)))
            if not same:
                new_files[rel] = size
        new_bytes = sum(new_files.values())
        allowance = new_bytes + MiB
        self.results["incremental"] = {
            "keys_added": add, "generate_s": round(gen.wall_s, 1),
            "base": {"bytes_uploaded": base_j["bytes_uploaded"], "files_uploaded": base_j["files_uploaded"],
                     "wall_s": round(base.wall_s, 3), "checkpoint_id": base_j["checkpoint_id"]},
            "incremental": {**incr.to_json(), "bytes_uploaded": j["bytes_uploaded"],
                            "files_uploaded": j["files_uploaded"], "files_total": j["files_total"],
                            "bytes_total": j["bytes_total"], "files_removed": j["files_removed"],
                            "checkpoint_id": j["checkpoint_id"]},
            "new_files": new_files, "new_bytes": new_bytes, "allowance_bytes": allowance,
            "ratio": j["bytes_uploaded"] / allowance,
        }
        self.latest_checkpoint = j["checkpoint_id"]

    def figure_local_restore(self, store: Path) -> None:
        """Restore the latest snapshot into the store dir while ``<storeDir>-<checkpointId>`` of that very
        snapshot is present: every file is hard-linked, nothing downloaded."""
        log("5. restore with the identical local checkpoint present")
        cp = store.with_name(f"{store.name}-{self.latest_checkpoint}")
        if not cp.is_dir():
            raise BenchError(f"expected the local checkpoint {cp} to exist")

        def after(run: int, sample: Sample) -> None:
            j = json.loads(sample.stdout)
            sample.extra.update(files_reused=j["files_reused"], files_total=j["files_total"],
                                bytes_downloaded=j["bytes_downloaded"], engine_s=j["duration_s"])
            if j["bytes_downloaded"]:
                raise BenchError(f"restore with a local checkpoint downloaded {j['bytes_downloaded']} bytes")

        v = Variant("statectl", lambda r: self.sc_restore(self.chain_bucket, "--store-dir", str(store)), after)
        self.rounds("local restore", [v], runs=self.s.local_runs)
        # The same command's floor: the CLI starting and exiting (imports, argument parsing).
        h = Variant("statectl_help", lambda r: [self.statectl, "--version"])
        self.rounds("local restore", [h], runs=self.s.local_runs)
        self.results["local_restore"] = {
            "statectl": {**summarize(v.samples),
                         "engine_s": stat([x.extra["engine_s"] for x in v.samples]).to_json()},
            "statectl_version_only": summarize(h.samples),
            "files": v.samples[-1].extra["files_total"],
        }
        self.drop_bucket(self.chain_bucket)

    def figure_memory(self) -> None:
        """Peak RSS of backup and restore at the base size (from figures 2 and 3) and of a store --big-gib
        large: backup into fresh buckets, restore into an empty dir."""
        s = self.s
        mem: dict[str, Any] = {"base_bytes": s.size_bytes}
        self.results["memory"] = mem
        if s.big_bytes is None:
            mem["skipped"] = "--big-gib 0"
            return
        keys = keys_for(s.big_bytes)
        need = int(s.big_bytes * 3.2) + 2 * GiB  # the store, a restore of it, the server's copy, slack
        free = shutil.disk_usage(s.work).free
        mem.update(big_bytes=s.big_bytes, disk_free=free, disk_needed=need)
        if free < need:
            mem["skipped"] = (f"not enough free disk for the {human(s.big_bytes)} store: {human(free)} free in "
                              f"{s.work}, need about {human(need)}")
            log("6. SKIPPED: " + mem["skipped"])
            return
        # The base store, its restores and buckets are not needed any more: free their disk first.
        for b in getattr(self, "restore_buckets", {}).values():
            self.drop_bucket(b)
        drop_tree(s.work / "upload-src")
        log(f"6. memory: generating the {human(s.big_bytes)} store ({keys} keys)")
        big = s.work / "big-state" / STORE / "Partition_0"
        gen = self.gen_store(big, keys)
        files = listing(big)
        mem["big_store"] = {"keys": keys, "files": len(files), "bytes": sum(v[0] for v in files.values()),
                            "generate_s": round(gen.wall_s, 1)}
        runs = min(s.runs, 3)  # peak RSS barely varies; the wall times here are not a figure
        buckets: dict[str, list[str]] = {"backup": [], "upload_only": []}

        def fresh(kind: str) -> str:
            for old in buckets[kind]:
                self.drop_bucket(old)
            b = self.bucket("big")
            buckets[kind] = [b]
            return b

        src = s.work / "big-upload-src"

        def upload_only(r: int) -> list[str]:
            # The checkpoint the first backup made, hard-linked aside (later backups delete it).
            if not src.exists():
                subprocess.run(["cp", "-al", str(checkpoint_dirs(big)[-1]), str(src)], check=True)
            return self.sc_backup(big, fresh("upload_only"), "--checkpoint-dir", str(src))

        def engine(run: int, sample: Sample) -> None:
            sample.extra["engine_s"] = json.loads(sample.stdout)["duration_s"]

        bk = Variant("statectl_backup", lambda r: self.sc_backup(big, fresh("backup")), engine)
        uo = Variant("statectl_backup_upload_only", upload_only, engine)
        self.rounds("memory", [bk, uo], runs=runs)
        self.drop_bucket(buckets["upload_only"][0])
        drop_tree(src)
        target = s.work / "big-restore"
        nostore = s.work / "no-such-state" / STORE / "Partition_0"

        def after(run: int, sample: Sample) -> None:
            j = json.loads(sample.stdout)
            if j["files_reused"]:
                raise BenchError("big restore reused local files")
            sample.extra.update(bytes_downloaded=j["bytes_downloaded"], engine_s=j["duration_s"])
            drop_tree(target)

        rs = Variant("statectl_restore", lambda r: self.sc_restore(buckets["backup"][0], "--target-dir", str(target),
                                                                  "--store-dir", str(nostore)), after)
        self.rounds("memory", [rs], runs=runs)
        mem["big_backup"] = summarize(bk.samples)
        mem["big_backup_upload_only"] = summarize(uo.samples)
        mem["big_restore"] = summarize(rs.samples)
        self.drop_bucket(buckets["backup"][0])
        drop_tree(big.parent.parent)


    def figure_gc(self) -> None:
        """Peak RSS of ``statectl gc`` over a file:// store of each of --gc-blobs unreferenced blobs (and of
        none: the interpreter and imports), whole processes (tests/bench/gcmem.py)."""
        from tests.bench import gcmem

        log(f"7. gc memory: file:// stores of {', '.join(f'{n:,}' for n in self.s.gc_blobs)} unreferenced blobs")
        self.results["gc"] = gcmem.bench(self.s.work / "gc", self.env, self.s.gc_blobs)


    def figure_drain(self) -> None:
        """The drain figures (tests/bench/drainbench.py): on their own Tansu broker, whole processes."""
        from tests.bench import drainbench

        n = 20_000 if self.s.quick else 100_000
        log(f"8. drain: {n:,} messages in flight; drain status on 64 intermediate partitions")
        self.results["drain"] = drainbench.bench(self.s.work / "drain", n, 64)


    def figure_standby(self) -> None:
        """The standby figures (tests/bench/standbybench.py): on their own Tansu broker."""
        from tests.bench import standbybench

        small, big = (0.125, 0.5) if self.s.quick else (1.0, 4.0)
        records = 100_000 if self.s.quick else 500_000
        fo_small, fo_big = (16, 64) if self.s.quick else (64, 512)
        # The container's follow is a throughput: over enough records that its fixed start-up (the job model,
        # a metadata round trip per replica: about 1.5 s on Tansu) does not decide the ratio.
        ct_records = 200_000 if self.s.quick else 1_000_000
        log(f"9. standby: promote at {small} and {big} GiB; apply rate and seeding over {records:,} records; "
            f"container follow over {ct_records:,} records; container failover at 6 x {fo_small} and 6 x {fo_big} "
            "MiB")
        self.results["standby"] = standbybench.bench(self.s.work / "standby", small, big, records,
                                                     container_records=ct_records, rounds=self.s.runs,
                                                     failover_small_mib=fo_small, failover_mib=fo_big)


    def figure_adstore(self) -> None:
        """The adstore figures (tests/bench/adstorebench.py): on their own Tansu broker, whole processes."""
        from tests.bench import adstorebench

        records = 200_000 if self.s.quick else 2_000_000
        log(f"10. adstore: {records:,} records from a topic vs a raw consume; Spark bulk path vs put path")
        self.results["adstore"] = adstorebench.bench(self.s.work / "adstore", records)
        cases = adstorebench.parse_cases(self.s.adstore_sizes) if self.s.adstore_sizes else \
            [(n // 10 if self.s.quick else n, order) for n, order in adstorebench.CROSSOVER]
        log(f"10b. adstore crossover: Spark vs put at {', '.join(f'{n:,} {o}' for n, o in cases)}, "
            f"{self.s.runs} rounds")
        self.results["adstore_crossover"] = adstorebench.crossover_bench(self.s.work / "adstore-x", cases,
                                                                        self.s.runs)

    def figure_rescale(self) -> None:
        """--only rescale: 4 -> 2 and 4 -> 8 of a hash-partitioned store of --rescale-keys keys against the obvious
        script; --only rescale-kg: 4 -> 8 -> 4 of a key-group store of --size-gib on SeaweedFS and file://
        (tests/bench/rescalebench.py)."""
        from tests.bench import rescalebench

        assert self.server is not None
        self.results["rescale"] = {}
        if "rescale" in self.s.only:
            log(f"12. rescale 4 -> 2 and 4 -> 8 of {self.s.rescale_keys:,} keys on Spark local[2] vs the script, "
                f"{self.s.runs} rounds")
            bucket = self.bucket("rescale")
            self.results["rescale"] = rescalebench.bench(self.s.work / "rescale", self.s.rescale_keys, self.env,
                                                         self.server.endpoint, bucket, self.s.runs, log=log)
            self.drop_bucket(bucket)
        if "rescale-kg" not in self.s.only:
            return
        log(f"12b. rescale 4 -> 8 -> 4 of a key-group store of {human(self.s.size_bytes)} (--key-groups), "
            f"SeaweedFS and file://, {self.s.runs} rounds")
        bucket = self.bucket("rescale-kg")
        work = self.s.work / "rescale"
        stores = {"s3": ["--blobstore", f"s3://{bucket}/statectl", "--s3-endpoint", self.server.endpoint],
                  "file": ["--blobstore", f"file://{work / 'kg-blobs'}"]}
        self.results["rescale"]["key_groups"] = {}
        rescalebench.bench_key_groups(work, self.s.size_bytes, self.env, stores, self.results["rescale"]["key_groups"],
                                      rounds=self.s.runs, server_cpu=self.server_cpu_s)
        self.drop_bucket(bucket)
        drop_tree(work / "kg-blobs")


# ---- the report -----------------------------------------------------------------------------------

def _fmt_s(st: dict[str, Any]) -> str:
    return f"{st['median']:.2f} s [{st['min']:.2f}-{st['max']:.2f}] n={st['n']}"


def _fmt_mb(st: dict[str, Any]) -> str:
    return f"{st['median']:.0f} MB [{st['min']:.0f}-{st['max']:.0f}]"


def figures(res: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's figures, each as value vs peer, ratio of medians, target and verdict."""
    out: list[dict[str, Any]] = []

    def add(fid: str, name: str, value: float, shown: str, peer: str, peer_value: float | None, peer_shown: str,
            target: str, ok: bool | None, ratio: float | None = None, note: str = "") -> None:
        if ratio is None and peer_value:
            ratio = value / peer_value
        out.append({"id": fid, "figure": name, "value": value, "shown": shown, "peer": peer,
                    "peer_value": peer_value, "peer_shown": peer_shown,
                    "ratio": None if ratio is None else round(ratio, 3), "target": target, "ok": ok, "note": note})

    b = res.get("backup")
    if b:
        sc = b["statectl"]["wall_s"]
        for peer, label in (("rclone", "rclone copy --transfers 8"), ("boto3", "boto3 PUT x8 threads")):
            p = b[peer]["wall_s"]
            ratio = sc["median"] / p["median"]
            add("2", "full backup, wall", sc["median"], _fmt_s(sc), label, p["median"], _fmt_s(p),
                "<= 1.00x rclone" if peer == "rclone" else "(reference)", ratio <= 1.0 if peer == "rclone" else None)
        uo = b["statectl_upload_only"]["wall_s"]
        p = b["rclone"]["wall_s"]
        add("2b", "full backup of a ready checkpoint dir (upload only), wall", uo["median"], _fmt_s(uo),
            "rclone copy --transfers 8", p["median"], _fmt_s(p), "(diagnostic)", None)
        sc_up = b["statectl"]["uploads"][-1]
        rc_up = b["rclone"]["uploads"][-1]
        add("2c", "full backup, bytes stored on the server", sc_up["bytes_on_server"],
            f"{human(sc_up['bytes_on_server'])} ({sc_up['objects']} objects; files {human(sc_up['bytes_uploaded'])})",
            "rclone", rc_up["bytes_on_server"], f"{human(rc_up['bytes_on_server'])} ({rc_up['objects']} objects)",
            "(same files)", None)
    r = res.get("restore")
    if r:
        sc = r["statectl"]["wall_s"]
        for peer, label, target in (("rclone", "rclone copy --checksum", "<= 1.00x rclone"),
                                    ("rclone_plus_fsync", "rclone copy + fsync of its files", "(fair durability)"),
                                    ("boto3", "boto3 GET x8 threads", "(reference)"),
                                    ("boto3_plus_fsync", "boto3 GET x8 + fsync of its files", "<= 1.00x")):
            p = r[peer]["wall_s"]
            add("3", "restore into an empty dir, wall", sc["median"], _fmt_s(sc), label, p["median"], _fmt_s(p),
                target, (sc["median"] <= p["median"]) if not target.startswith("(") else None)
    if res.get("startup"):
        from tests.bench.startup import add_figures

        add_figures(res["startup"], add, _fmt_s)
    if res.get("restore_peers"):
        from tests.bench.restorebench import add_figures

        add_figures(res["restore_peers"], add, _fmt_s)
    if res.get("rescale"):
        from tests.bench import rescalebench

        rescalebench.add_figures(res["rescale"], add, _fmt_s)
    if res.get("all_stores"):
        from tests.bench.allbench import add_figures

        add_figures(res["all_stores"], add, _fmt_s)
    inc = res.get("incremental")
    if inc:
        add("4", "incremental backup after +5% keys, bytes uploaded", inc["incremental"]["bytes_uploaded"],
            human(inc["incremental"]["bytes_uploaded"]), "new files + 1 MiB", inc["allowance_bytes"],
            f"{human(inc['new_bytes'])} + 1 MiB ({len(inc['new_files'])} files)", "<= 1.05x",
            inc["ratio"] <= 1.05, ratio=inc["ratio"])
    lr = res.get("local_restore")
    if lr:
        w = lr["statectl"]["wall_s"]
        h = lr["statectl_version_only"]["wall_s"]
        add("5", "restore with identical local checkpoint, wall", w["median"], _fmt_s(w), "1 s target", 1.0,
            f"(statectl --version alone: {h['median']:.2f} s; engine {lr['statectl']['engine_s']['median']:.3f} s)",
            "< 1 s", w["median"] < 1.0)
    m = res.get("memory")
    if m:
        for what, base_res in (("backup", b), ("restore", r)):
            base = base_res["statectl"] if base_res else None
            if base:
                rss = base["max_rss_mb"]
                rc = base_res["rclone"]["max_rss_mb"]
                add("6", f"peak RSS, {what}, {human(m['base_bytes'])} store", rss["median"], _fmt_mb(rss),
                    "rclone", rc["median"], _fmt_mb(rc), "< 300 MB", rss["median"] < 300)
            big = m.get(f"big_{what}")
            if big:
                brss = big["max_rss_mb"]
                ok = brss["median"] < 300 and (base is None or brss["median"] <= base["max_rss_mb"]["median"] * 1.15)
                add("6", f"peak RSS, {what}, {human(m['big_bytes'])} store", brss["median"], _fmt_mb(brss),
                    f"same at {human(m['base_bytes'])}" if base else "",
                    base["max_rss_mb"]["median"] if base else None, _fmt_mb(base["max_rss_mb"]) if base else "",
                    "< 300 MB, ~1.0x", ok, note=f"wall {_fmt_s(big['wall_s'])}")
            elif m.get("skipped"):
                add("6", f"peak RSS, {what}, big store", 0, "skipped", "", None, "", "", None, note=m["skipped"])
        uo_big = m.get("big_backup_upload_only")
        uo_base = b.get("statectl_upload_only") if b else None
        if uo_big:
            brss = uo_big["max_rss_mb"]
            add("6b", f"peak RSS, backup of a ready checkpoint dir (upload only), {human(m['big_bytes'])} store",
                brss["median"], _fmt_mb(brss), f"same at {human(m['base_bytes'])}" if uo_base else "",
                uo_base["max_rss_mb"]["median"] if uo_base else None,
                _fmt_mb(uo_base["max_rss_mb"]) if uo_base else "", "(diagnostic)", None)
    g = res.get("gc")
    if g:
        runs = {r["blobs"]: r for r in g["runs"] if r["variant"] == "current"}
        idle = runs.get(0)
        for n in g["blobs"]:
            r = runs[n]
            add("7", f"peak RSS, gc of {n:,} unreferenced blobs (file://)", r["max_rss_mb"], f"{r['max_rss_mb']:.0f} MB",
                "same with no blob to delete", idle["max_rss_mb"] if idle else None,
                f"{idle['max_rss_mb']:.0f} MB" if idle else "", "< 100 MB", r["max_rss_mb"] < 100,
                note=f"wall {r['wall_s']:.1f} s")
        growth = g.get("growth", {}).get("current")
        if growth:
            # Flat = no per-blob state: a held listing costs ~500 bytes a blob (273-535 MB before the fix);
            # what is left (worker threads' malloc arenas filling up) does not grow with the store.
            per_blob = growth["bytes_per_blob"]
            add("7", f"peak RSS, gc, {growth['to']:,} vs {growth['from']:,} blobs", growth["rss_mb_to"],
                f"{growth['rss_mb_to']:.0f} MB", f"{growth['from']:,} blobs", growth["rss_mb_from"],
                f"{growth['rss_mb_from']:.0f} MB", "< 32 B per extra blob", per_blob < 32, ratio=growth["ratio"],
                note=f"{per_blob:.1f} B per extra blob")
    rate = res.get("rate")
    if rate:
        from tests.bench.ratebench import RATE_FLAG, figure_row

        row = figure_row(rate)
        add("13", f"backup --limit-rate {RATE_FLAG} of {human(rate['bytes_uploaded'])}, wall", row["value"],
            _fmt_s(rate["wall_s"]), "ideal: bytes / rate", row["ideal"], f"{row['ideal']:.2f} s", "1.00x +- 10 %",
            row["ok"], ratio=row["ratio"], note=f"engine {rate['engine_s']['median']:.2f} s; no limit: "
                                                f"{rate['unlimited']['wall_s']['median']:.2f} s")
    return out


def _cpu_line(what: str, key: str, r: dict[str, Any]) -> str:
    server = f", server {r['server_cpu_s']['median']:5.2f} s CPU" if "server_cpu_s" in r else ""
    engine = [x["extra"]["engine_s"] for x in r.get("samples", []) if "engine_s" in x.get("extra", {})]
    inside = f" (engine {stat(engine).median:.2f} s)" if engine else ""
    return (f"  {what} {key:<30} wall {_fmt_s(r['wall_s'])}{inside}; client {r['cpu_s']['median']:5.2f} s CPU{server}; "
            f"peak RSS {_fmt_mb(r['max_rss_mb'])}")


def report_text(res: dict[str, Any]) -> str:
    meta = res.get("meta", {})
    st = res.get("store", {})
    lines = ["", "statectl benchmark", "=" * 18]
    if meta:
        lines.append(f"{meta['date']}  {meta['cpus']} CPUs, {meta['memory']}, Python {meta['python']}, "
                     f"statectl {meta['statectl']}, {meta['rclone']}, weed {meta['weed']}")
        ss = meta["settings"]
        lines.append(f"runs per command: {ss['runs']} (1 if over {ss['long_s']:.0f} s), interleaved; "
                     f"parallelism {ss['parallelism']} for every tool; one SeaweedFS server on loopback; "
                     f"load average {meta['loadavg_at_start'][0]:.2f} at start, {res.get('loadavg_at_end', ['?'])[0]} at end")
    if st:
        lines.append(f"store: {st['keys']} keys x {st['value_size']} B random values, {st['files']} files, "
                     f"{human(st['bytes'])} ({st['sst_files']} SSTs of {min(st['sst_sizes_mib'], default=0)}-"
                     f"{max(st['sst_sizes_mib'], default=0)} MiB), generated in {st['generate_s']} s")
    up = res.get("upload_source")
    if up:
        lines.append(f"uploaded by every tool: the store's RocksDB checkpoint, {up['files']} files, {human(up['bytes'])}")
    lines.append("")
    figs = res.get("figures", [])
    if figs:
        lines += ["| # | figure | statectl: median [min-max] | peer | peer: median [min-max] | ratio | target | result |",
                  "|---|---|---|---|---|---|---|---|"]
        for f in figs:
            ratio = "" if f["ratio"] is None else f"{f['ratio']:.2f}x"
            verdict = {True: "OK", False: "**MISSED**", None: ""}[f["ok"]]
            note = f" ({f['note']})" if f["note"] else ""
            lines.append(f"| {f['id']} | {f['figure']} | {f['shown']} | {f['peer']} | {f['peer_shown']} | {ratio} "
                         f"| {f['target']} | {verdict}{note} |")
    b = res.get("backup")
    if b:
        lines += ["", f"per command (medians; CPU = user+sys; the client and the server share {meta.get('cpus', '?')} cores):"]
        for k in ("statectl", "statectl_upload_only", "rclone", "boto3"):
            lines.append(_cpu_line("backup ", k, b[k]))
    r = res.get("restore")
    if r:
        for k in ("statectl", "rclone", "boto3"):
            lines.append(_cpu_line("restore", k, r[k]))
    m = res.get("memory", {})
    for k, what, key in (("big_backup", "backup ", "statectl"), ("big_backup_upload_only", "backup ", "statectl_upload_only"),
                         ("big_restore", "restore", "statectl")):
        if k in m:
            lines.append(_cpu_line(what, f"{key}, {human(m['big_bytes'])}", m[k]))
    inc = res.get("incremental")
    if inc:
        i = inc["incremental"]
        lines += ["", f"incremental: +{inc['keys_added']} keys; uploaded {i['files_uploaded']} of {i['files_total']} files, "
                      f"{human(i['bytes_uploaded'])} in {i['wall_s']:.2f} s; new files in the checkpoint: "
                      + ", ".join(f"{k} ({human(v)})" for k, v in sorted(inc["new_files"].items()))]
    if res.get("gc"):
        from tests.bench.gcmem import report_lines

        lines += ["", *report_lines(res["gc"])]
    if res.get("drain"):
        from tests.bench import drainbench

        lines += ["", *drainbench.report_lines(res["drain"])]
    if res.get("standby"):
        from tests.bench import standbybench

        lines += ["", *standbybench.report_lines(res["standby"])]
    if res.get("adstore"):
        from tests.bench import adstorebench

        lines += ["", *adstorebench.report_lines(res["adstore"])]
    if res.get("adstore_crossover"):
        from tests.bench import adstorebench

        lines += ["", *adstorebench.crossover_lines(res["adstore_crossover"])]
    if res.get("startup"):
        from tests.bench import startup

        lines += ["", *startup.report_lines(res["startup"])]
    if res.get("restore_peers"):
        from tests.bench import restorebench

        lines += ["", *restorebench.report_lines(res["restore_peers"])]
    if res.get("all_stores"):
        from tests.bench import allbench

        lines += ["", *allbench.report_lines(res["all_stores"])]
    if res.get("copy"):
        from tests.bench import copybench

        lines += ["", *copybench.report_lines(res["copy"])]
    if res.get("rate"):
        from tests.bench import ratebench

        lines += ["", *ratebench.report_lines(res["rate"])]
    if res.get("rescale"):
        from tests.bench import rescalebench

        lines += ["", *rescalebench.report_lines(res["rescale"])]
    meta_flags = meta.get("peer_flags")
    if meta_flags:
        lines += ["", "peers and flags:",
                  f"  rclone upload:   rclone copy <checkpoint dir> bench:<fresh bucket>/rclone "
                  f"{' '.join(meta_flags['rclone_upload'])} -q",
                  "      (defaults otherwise: files <200 MiB as single PUTs with Content-MD5, HEAD after upload;"
                  " bucket made beforehand as for statectl, hence --s3-no-check-bucket)",
                  f"  rclone download: rclone copy bench:<bucket>/rclone <empty dir> {' '.join(meta_flags['rclone_download'])} -q",
                  "      (MD5 of every download checked against the object's ETag / stored MD5: rclone's default post-copy"
                  " check, not disabled; --checksum compares by hash rather than mod-time)",
                  "      rclone does not fsync; '+ fsync' adds a timed 'sync FILE...' (fsync of each file), which statectl"
                  " restore does itself",
                  f"  boto3: tests/bench/s3peer.py, {meta_flags['boto3']}",
                  "  statectl: backup --store-dir (checkpoint + upload), or --checkpoint-dir <the same checkpoint> "
                  "(upload only); restore --target-dir <empty> --store-dir <missing> (nothing local to reuse)",
                  "  every backup into a fresh bucket; every tool reads the same hard-linked files; the VM's DAMON"
                  " reclaim pages out data idle for ~30 s, so some reads (mostly the server's) go to disk: medians of"
                  " interleaved runs, ranges shown"]
    if res.get("error"):
        lines += ["", f"ERROR: {res['error']}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    s = parse_args(argv)
    s.bench_dir.mkdir(parents=True, exist_ok=True)
    bench = Bench(s)
    code = 0
    started = time.monotonic()
    try:
        bench.start()
        bench.run_all()
    except KeyboardInterrupt:
        bench.results["error"] = "interrupted"
        code = 130
    except Exception as e:  # report what was measured so far, and why it stopped
        bench.results["error"] = f"{type(e).__name__}: {e}"
        traceback.print_exc()
        code = 1
    finally:
        bench.cleanup()
    res = bench.results
    res["total_s"] = round(time.monotonic() - started, 1)
    res["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    try:
        res["figures"] = figures(res)
    except Exception as e:  # a partial run: keep the raw results
        res.setdefault("error", f"report: {type(e).__name__}: {e}")
    out = s.bench_dir / "results.json"
    out.write_text(json.dumps(res, indent=2) + "\n")
    sys.stdout.write(report_text(res))
    sys.stdout.write(f"\nJSON report: {out}  (total {res['total_s']:.0f} s)\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
