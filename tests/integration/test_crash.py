"""Crash safety: SIGKILL the backup process at every phase of the commit protocol and at random
moments, then check that nothing committed was lost and nothing is leaked.

After each kill: ``restore`` yields exactly the key/values of the last committed snapshot; every
retained snapshot still verifies with all its blobs (no referenced blob was deleted); and the next
backup plus ``gc`` leave zero unreferenced blobs. ``make soak`` runs many more trials
(STATECTL_CRASH_TRIALS).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path


from statectl.blobstore import open_blobstore
from statectl.engine.backup import BackupOptions, backup
from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.index import read_index, snapshot_blob_ids
from statectl.engine.gc import GcOptions, gc
from statectl.catalog.refs import StoreRef
from statectl.local.layout import store_dir
from statectl.engine.restore import RestoreOptions, restore
from statectl.engine.snapshots import verify_snapshot
from tests.tools.genstore import fingerprint, make_store
from tests.tools.gcwait import past_mtime_grain

REF = StoreRef("crashy", "1", "Partition 0", "counts")
# Where the process dies, and whether the new snapshot is committed by then.
PHASES = {
    "before-upload": False,
    "during-upload": False,
    "after-index-upload": False,
    "after-commit": True,
    "during-cleanup": True,
    "after-cleanup": True,
}
TRIALS = int(os.environ.get("STATECTL_CRASH_TRIALS", "25"))


class World:
    def __init__(self, tmp: Path, url: str, env_extra: dict[str, str], s3_options=None):
        self.tmp = tmp
        self.url = url
        self.sdir = store_dir(tmp / "state", REF.store, REF.task)
        self.bs = open_blobstore(url, s3=s3_options)
        self.cps = BlobCheckpointStore(self.bs)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("STATECTL_", "AWS_"))}
        self.env = dict(env, XDG_CONFIG_HOME=str(tmp / "cfg"), **env_extra)
        self.args = [str(Path(sys.executable).parent / "statectl"), "backup", "--blobstore", url, "--job", REF.job,
                     "--task", REF.task, "--store", REF.store, "--store-dir", str(self.sdir), "-q",
                     "--chunk-size", "1MiB", "--parallelism", "2"]
        self.grown = 0

    def grow(self) -> tuple[int, str]:
        self.grown += 1
        make_store(self.sdir, 400, 1024, seed=self.grown, start=1_000_000 * self.grown, sst_mb=1)
        return fingerprint(self.sdir)

    def backup_killed_at(self, failpoint: str) -> int:
        proc = subprocess.run(self.args, env=dict(self.env, STATECTL_FAILPOINTS=f"{failpoint}=kill"),
                              capture_output=True, timeout=120)
        return proc.returncode

    def backup_killed_after(self, seconds: float) -> int:
        proc = subprocess.Popen(self.args, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        return proc.returncode

    def timed_backup(self) -> float:
        started = time.monotonic()
        subprocess.run(self.args, env=self.env, check=True, capture_output=True, timeout=120)
        return time.monotonic() - started

    def referenced(self) -> set[str]:
        keys: set[str] = set()
        for r in self.cps.list(REF):
            keys |= snapshot_blob_ids(r.index_blob_id, read_index(self.bs, r.index_blob_id))
        return keys

    def blobs(self) -> set[str]:
        return {i.key for i in self.bs.list("blobs/")}


def _schedule(trials: int, seed: int) -> list[str | float]:
    """Every phase at least twice (when trials allow), the rest random moments, shuffled."""
    rng = random.Random(seed)
    fixed: list[str | float] = [p for p in PHASES for _ in range(max(1, min(2, trials // (2 * len(PHASES)))))]
    moments: list[str | float] = [rng.random() for _ in range(max(0, trials - len(fixed)))]
    plan = fixed + moments
    rng.shuffle(plan)
    return plan


def _run_trials(world: World, trials: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    committed_fp = world.grow()
    world.timed_backup()
    full = world.timed_backup()  # an incremental backup with nothing new: the process's fixed cost
    outcomes = {"committed": 0, "not committed": 0}
    for i, kill in enumerate(_schedule(trials, seed)):
        before = world.cps.latest(REF)
        new_fp = world.grow()
        if isinstance(kill, str):
            rc = world.backup_killed_at(kill)
            assert rc == -signal.SIGKILL, (kill, rc)
        else:
            world.backup_killed_after(full * (0.3 + 1.2 * kill))
        latest = world.cps.latest(REF)
        is_new = latest.checkpoint_id != before.checkpoint_id
        if isinstance(kill, str):
            assert is_new == PHASES[kill], (i, kill)
        outcomes["committed" if is_new else "not committed"] += 1
        expected = new_fp if is_new else committed_fp

        # The last committed snapshot restores exactly; no blob a retained snapshot needs is gone.
        target = world.tmp / f"restore-{i}"
        restore(RestoreOptions(REF, world.tmp / "nowhere", target_dir=target), world.bs, world.cps)
        assert fingerprint(target) == expected, (i, kill)
        for record in world.cps.list(REF):
            v = verify_snapshot(REF, world.bs, world.cps, record.checkpoint_id, download=rng.random() < 0.3)
            assert v.ok, (i, kill, v.missing, v.corrupt)

        # The next backup and gc leave nothing unreferenced.
        backup(BackupOptions(REF, world.sdir, chunk_size=1024 * 1024), world.bs, world.cps)
        past_mtime_grain(world.bs)
        gc(GcOptions(grace_seconds=0), world.bs, world.cps)
        assert world.blobs() == world.referenced(), (i, kill)
        committed_fp = new_fp
    return outcomes


def test_sigkill_at_every_phase_and_random_moments_file(tmp_path: Path, monkeypatch):
    monkeypatch.setattr("statectl.engine.gc.MIN_GRACE_SECONDS", 0)  # gc right after each kill: no grace
    url = f"file://{tmp_path / 'blobs'}"
    world = World(tmp_path, url, {})
    make_store(world.sdir, 3000, 1024, seed=0, sst_mb=1)
    outcomes = _run_trials(world, TRIALS, seed=int(os.environ.get("STATECTL_CRASH_SEED", "7")))
    assert sum(outcomes.values()) >= min(TRIALS, 50)
    assert outcomes["committed"] and outcomes["not committed"]


def test_sigkill_at_every_phase_s3(tmp_path: Path, s3_url: str, s3_options, monkeypatch):
    monkeypatch.setattr("statectl.engine.gc.MIN_GRACE_SECONDS", 0)  # S3 objects cannot be backdated
    env = {"STATECTL_S3_ENDPOINT": s3_options.endpoint_url, "AWS_ACCESS_KEY_ID": s3_options.access_key_id,
           "AWS_SECRET_ACCESS_KEY": s3_options.secret_access_key}
    world = World(tmp_path, s3_url, env, s3_options)
    make_store(world.sdir, 2000, 1024, seed=0, sst_mb=1)
    outcomes = _run_trials(world, len(PHASES), seed=11)
    assert outcomes["committed"] == 3 and outcomes["not committed"] == 3
