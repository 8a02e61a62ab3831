"""statectl standby end to end on a real Kafka-protocol broker (Tansu): followers as real processes
keeping a replica current while puts and deletes are produced, killed at random moments, seeded from a
snapshot the job's checkpoint names with its changelog position, re-seeded when their offset fell off the
changelog; promotes (fencing the follower, with it dead, timing out, over an old active store); the error
exits; and the placement check on the job's coordinator stream.

Every replica is compared key for key with what was produced (deletes applied) and, after a promote, with a
store ``statectl restore --from-changelog`` builds from the whole changelog partition."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from statectl.catalog.kafka_log import KafkaCheckpointLog
from statectl.catalog.refs import StoreRef
from statectl.engine.standby.follow import follow
from statectl.engine.standby.replica import Replica, standby_dir
from statectl.formats.checkpoint import (
    BLOB_STORE_FACTORY,
    KAFKA_CHANGELOG_FACTORY,
    SSP,
    KafkaChangelogMarker,
    decode_changelog_marker,
    encode_changelog_marker,
)
from statectl.formats.offsets import OFFSET_V2, SIDE_INPUT_OFFSETS, write_offsets
from statectl.kafka.coordinator import CoordinatorStream
from tests.tools.genstore import dump_store, fingerprint, make_store
from tests.tools.standby_helpers import (
    STATECTL,
    ChangelogWriter,
    Feeder,
    Follower,
    alive,
    apply_records,
    clean_env,
    cli,
    cli_here,
    offsets_of,
    random_records,
    read_store,
    replica_offset,
    wait_until,
)

STORE = "counts"
TASK = "Partition 0"
# A world's job has no config on Kafka unless a test writes one: promote then takes the operator's word that
# the job restores the store non-transactionally.
NT = "--non-transactional-restore"


@dataclass
class World:
    """One test's job, changelog (one partition) and state dir on the shared broker."""

    bootstrap: str
    tmp: Path
    job: str
    topic: str
    writer: ChangelogWriter

    @property
    def state(self) -> Path:
        return self.tmp / "state"

    @property
    def replica(self) -> Path:
        return standby_dir(self.state, STORE, TASK)

    @property
    def active(self) -> Path:
        return self.state / STORE / "Partition_0"

    @property
    def ref(self) -> StoreRef:
        return StoreRef(self.job, "1", TASK, STORE)

    @property
    def lock_file(self) -> Path:
        return self.replica.with_name(self.replica.name + ".standby.lock")

    @property
    def status_file(self) -> Path:
        return self.replica.with_name(self.replica.name + ".standby.json")

    def where(self, *, changelog: bool = True) -> list[str]:
        """The flags that name the replica (with --changelog/--partition unless ``changelog`` is False:
        then they come from the job's config and the task's name)."""
        args = ["--kafka", self.bootstrap, "--job", self.job, "--task", TASK, "--store", STORE,
                "--state-dir", str(self.state)]
        return args + (["--changelog", self.topic, "--partition", "0"] if changelog else [])

    def offset_key(self) -> str:
        return f"kafka.{self.topic}.0"

    def reference_store(self, name: str = "reference") -> dict[bytes, bytes]:
        """The store ``restore --from-changelog`` builds from the whole changelog partition."""
        target = self.tmp / name
        cli_here(self.tmp, "restore", "--from-changelog", self.topic, "--partition", "0", "--kafka", self.bootstrap,
            "--target-dir", str(target))
        return read_store(target)


@pytest.fixture
def world(tansu, tmp_path: Path):
    tag = uuid.uuid4().hex[:10]
    topic = tansu.create_topic(f"standby-changelog-{tag}", partitions=1)
    writer = ChangelogWriter(tansu.bootstrap, topic)
    (tmp_path / "state").mkdir()
    try:
        yield World(tansu.bootstrap, tmp_path, f"standby-job-{tag}", topic, writer)
    finally:
        writer.close()


@pytest.fixture
def procs():
    """Followers started by a test (killed at its end if still running) and pids of followers a promote
    restarted (SIGTERM, then SIGKILL)."""
    started: list[Follower] = []
    restarted: list[int] = []
    yield started, restarted
    for f in started:
        f.kill()
    for pid in restarted:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if not alive(pid):
                break
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + 30
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)


def start(world: World, procs, *extra: str, changelog: bool = True, json_output: bool = True,
          module: bool = False) -> Follower:
    f = Follower(world.tmp, [*world.where(changelog=changelog), *extra], json_output=json_output, module=module)
    procs[0].append(f)
    return f


def caught_up(world: World, f: Follower | None = None, upto: int | None = None, timeout: float = 90) -> None:
    """Wait until the replica's OFFSET-v2 names ``upto`` (default: the last offset written) and, given
    ``f``, the follower ``f`` holds the replica's lock: a replica caught up by an earlier follower is not
    one ``f`` follows yet (``f`` may still be importing, its signal handlers not in place)."""
    target = world.writer.last_offset if upto is None else upto

    def done() -> bool:
        if f is not None:
            f.assert_running()
            try:
                if lock_holder_pid(world) != str(f.pid):
                    return False
            except (OSError, IndexError):
                return False
        try:
            return replica_offset(world.replica, world.topic) == target
        except (OSError, ValueError):
            return False

    wait_until(done, timeout, f"the replica reaches offset {target}" + (f"\n{f.describe()}" if f else ""))


def status_rows(world: World, *, process: bool = False) -> list[dict]:
    """``standby status -o json``'s rows: a read-back, in this process unless ``process`` (the test of the
    command runs it once as a whole process)."""
    run = cli if process else cli_here
    return json.loads(run(world.tmp, "standby", "status", "--state-dir", str(world.state), "-o", "json").stdout)


def lock_holder_pid(world: World) -> str:
    """The pid the follower holding the replica's lock wrote into it ("<pid> <host>")."""
    try:
        return world.lock_file.read_text().split(" ")[0]
    except OSError:
        return ""


def sigterm_pending(pid: int) -> bool:
    """SIGTERM is pending for process ``pid`` (sent to a stopped process, not yet handled)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("ShdPnd:", "SigPnd:")) and int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)):
            return True
    return False


# -- 1. follow, status, promote ------------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_follower_keeps_up_with_puts_and_deletes_and_promote_makes_it_the_active(world: World, procs):
    w = world
    with CoordinatorStream(w.bootstrap, w.job, "1") as cs:  # the job's config names the changelog
        cs.create()
        # Non-transactional restore: the job's start reuses the active dir a promote swaps the replica into
        # (test_standby_restore_mode has the default, transactional restore).
        cs.write_config({f"stores.{STORE}.changelog": f"kafka.{w.topic}",
                         "systems.kafka.samza.factory": "org.apache.samza.system.kafka.KafkaSystemFactory",
                         "task.transactional.state.restore.enabled": "false"})
        cs.write_changelog_partition(TASK, 0)  # and its changelog partition
        cs.write_task_container(TASK, "0")
        cs.write_container_host("0", "the-old-host.example.com")
    w.writer.send(random_records(random.Random(1), 300))  # a history before the follower starts
    assert w.replica == w.tmp / "state.statectl-standby" / "0" / STORE / "Partition_0"  # beside the state dir

    f = start(w, procs, changelog=False)
    feeder = Feeder(w.writer, seed=2, batch=25, pause_s=0.05).start()
    try:
        # While records keep coming: status shows the replica followed, by that process, with its lag.
        wait_until(lambda: w.status_file.exists(), 60, f"the follower's status file\n{f.describe()}")
        # The file is there from the start; its lag once the follower has measured it (every second).
        wait_until(lambda: status_rows(w) and status_rows(w)[0]["lag_records"] is not None, 60, "the first lag")
        rows = status_rows(w, process=True)
        assert len(rows) == 1, rows
        row = rows[0]
        assert (row["replica_dir"], row["changelog"], row["partition"]) == (str(w.replica), w.topic, 0)
        assert row["following"] is True and row["follower_pid"] == f.pid and row["promotable"] is True
        assert isinstance(row["lag_records"], int) and row["lag_records"] >= 0
        assert isinstance(row["applied_offset"], int)
        wait_until(lambda: feeder.sent >= 1500, 60, "the feeder writes for a few seconds")
        f.assert_running()
    finally:
        feeder.stop()
    caught_up(w, f)  # it keeps up: every record produced is applied
    lines = f.status_lines()
    assert lines, f.describe()
    for line in lines:
        assert line["replica_dir"] == str(w.replica) and line["pid"] == f.pid and line["changelog"] == w.topic
        assert isinstance(line["lag_records"], int) and line["lag_records"] >= 0
        assert line["end_offset"] is None or line["end_offset"] <= w.writer.last_offset + 1
    applied = [line["applied_offset"] for line in lines if line["applied_offset"] is not None]
    assert applied == sorted(applied)
    assert lines[0]["seeded_from"] == "changelog"  # no snapshot: bootstrapped from the changelog

    tail = w.writer.send(random_records(random.Random(3), 40))  # a tail the promote may have to catch up
    p = cli(w.tmp, "standby", "promote", *w.where(changelog=False), "-o", "json")
    r = json.loads(p.stdout)
    assert f.wait(60) == 0, f.describe()  # fenced by SIGTERM: a clean exit
    last = w.writer.last_offset
    assert last == tail[-1]
    assert r["promoted_dir"] == str(w.active)
    assert r["caught_up_offset"] == last
    assert isinstance(r["records_applied"], int) and r["records_applied"] >= 0
    assert isinstance(r["duration_s"], (int, float)) and r["duration_s"] >= 0
    assert r["replaced_active"] is False and r["locality_updated"] is True
    assert r["restore_mode"] == "non-transactional"
    # The follower flushed what it applied when fenced; the promote applied exactly the rest.
    fr = f.result()
    assert fr["records_applied"] + r["records_applied"] == len(w.writer.log), (fr, r)

    expected = w.writer.state()
    assert read_store(w.active) == w.reference_store() == expected
    assert offsets_of(w.active) == {w.offset_key(): str(last)}
    assert offsets_of(w.active, SIDE_INPUT_OFFSETS) == {w.offset_key(): str(last)}
    assert not w.replica.exists() and not w.status_file.exists() and not w.lock_file.exists()
    assert not [x for x in w.active.parent.iterdir() if x.name.startswith(".")], list(w.active.parent.iterdir())
    with CoordinatorStream(w.bootstrap, w.job, "1") as cs:  # the task's container now points at this host
        assert cs.refresh()
        assert cs.locality().container_hosts["0"] == socket.gethostname()
    assert status_rows(w) == []


# -- 2. killed at random moments ------------------------------------------------------------------------


def assert_consistent_after_kill(world: World) -> None:
    """After a SIGKILL: the offset the replica's OFFSET-v2 names is covered by its content, which is the
    store of some prefix of the changelog that reaches at least that offset (batches are atomic and
    applied in order; the offset never claims more than is durable)."""
    offsets = offsets_of(world.replica)
    if offsets is None:
        return  # killed before its first offset file: the next follower seeds the replica anew
    assert set(offsets) == {world.offset_key()}, offsets
    value = offsets[world.offset_key()]
    floor = -1 if value is None else int(value)
    got = dump_store(world.replica)
    records = world.writer.records()
    assert floor <= (records[-1][0] if records else -1)
    state = apply_records([r for r in records if r[0] <= floor])
    if state == got:
        return
    for o, k, v in (r for r in records if r[0] > floor):
        if v is None:
            state.pop(k, None)
        else:
            state[k] = v
        if state == got:
            return
    raise AssertionError(f"the replica (OFFSET-v2 {floor}) is not the store of any prefix of the changelog "
                         f"from that offset on ({len(got)} keys)")


# SIGKILL trials of the follower; make soak runs many more (STATECTL_STANDBY_KILLS)
TRIALS = int(os.environ.get("STATECTL_STANDBY_KILLS", "10"))


@pytest.mark.timeout(600)
def test_follower_killed_at_random_moments_ends_exact(world: World, procs):
    w = world
    rng = random.Random(20260601)
    w.writer.send(random_records(random.Random(4), 200))
    feeder = Feeder(w.writer, seed=5, batch=10, pause_s=0.05).start()
    kills = 0
    try:
        for trial in range(TRIALS):
            f = start(w, procs, json_output=trial % 2 == 0)
            if trial % 4 != 3:  # most kills land while it follows; every fourth one anywhere from its start
                wait_until(lambda f=f: lock_holder_pid(w) == str(f.pid), 60,
                           f"the follower takes the lock\n{f.describe()}")
            time.sleep(rng.uniform(0.1, 1.0))
            f.assert_running()
            f.kill()
            assert f.proc.returncode == -signal.SIGKILL, f.describe()
            kills += 1
            assert_consistent_after_kill(w)
    finally:
        feeder.stop()
    assert kills == TRIALS and len(w.writer.log) > 500
    last = w.writer.last_offset
    f = start(w, procs)
    caught_up(w, f)
    assert f.terminate() == 0, f.describe()
    assert f.result()["applied_offset"] == last
    assert read_store(w.replica) == w.writer.state()
    assert offsets_of(w.replica) == {w.offset_key(): str(last)}
    assert offsets_of(w.replica, SIDE_INPUT_OFFSETS) == {w.offset_key(): str(last)}


# -- 3. seeded from a snapshot, then the tail -------------------------------------------------------------


def backup_with_changelog_position(world: World, store_dir: Path, offset: int) -> str:
    """Back up ``store_dir`` as the job's snapshot of the store, committed to its checkpoint topic together
    with the store's changelog position ``offset``; return the snapshot's index blob id."""
    from statectl.engine.backup import BackupOptions, backup
    from statectl.session import Session

    marker = encode_changelog_marker(KafkaChangelogMarker(SSP("kafka", world.topic, 0), str(offset)))
    with Session.from_env(kafka=world.bootstrap, blobstore=f"file://{world.tmp / 'blobs'}",
                          env=clean_env(world.tmp), create_blobstore=True) as session:
        r = backup(BackupOptions(world.ref, store_dir, markers={KAFKA_CHANGELOG_FACTORY: {STORE: marker}}),
                   session.blobstore, session.catalog)
    # The job's latest checkpoint names both the snapshot and the changelog position.
    log = KafkaCheckpointLog(world.bootstrap, world.job, "1")
    try:
        cp = log.latest_checkpoints()[0][TASK]
    finally:
        log.close()
    assert cp.state_checkpoint_markers[BLOB_STORE_FACTORY][STORE] == r.snapshot_id
    got = decode_changelog_marker(cp.state_checkpoint_markers[KAFKA_CHANGELOG_FACTORY][STORE])
    assert (got.ssp.stream, got.ssp.partition, got.offset) == (world.topic, 0, str(offset))
    return r.snapshot_id


def seeder(world: World):
    from statectl.engine.restore import RestoreOptions, restore
    from statectl.session import Session

    calls: list[str] = []

    def seed(index_id: str, target: Path) -> None:
        calls.append(index_id)
        with Session.from_env(kafka=world.bootstrap, blobstore=f"file://{world.tmp / 'blobs'}",
                              env=clean_env(world.tmp)) as session:
            restore(RestoreOptions(world.ref, target, target_dir=target, snapshot=index_id, force=True),
                    session.blobstore, session.catalog)

    return seed, calls


def follow_in_thread(replica: Replica, bootstrap: str, until: int, seed=None, timeout: float = 120, progress=None):
    """Run ``follow`` on a thread until the replica has applied offset ``until``; return its result."""
    stop = threading.Event()
    out: list = []
    errors: list[BaseException] = []

    def on_status(st) -> None:
        if st.applied_offset is not None and st.applied_offset >= until:
            stop.set()

    def run() -> None:
        try:
            out.append(follow(replica, bootstrap, seed=seed, stop=stop, on_status=on_status, status_every_s=0.05,
                              progress=progress))
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(timeout)
    stop.set()
    th.join(30)
    assert not th.is_alive(), "follow did not stop"
    if errors:
        raise errors[0]
    return out[0]


@pytest.mark.timeout(300)
def test_seeded_from_the_snapshot_the_checkpoint_names_then_the_tail(world: World, procs):
    w = world
    n, m = 500, 321
    assert w.writer.send(random_records(random.Random(6), n)) == list(range(n))
    built = w.tmp / "active-host" / STORE / "Partition_0"
    cli_here(w.tmp, "restore", "--from-changelog", w.topic, "--partition", "0", "--kafka", w.bootstrap,
        "--target-dir", str(built), "--until-offset", str(n))
    assert read_store(built) == w.writer.state(n - 1)
    snapshot = backup_with_changelog_position(w, built, n - 1)
    w.writer.send(random_records(random.Random(7), m))
    last = w.writer.last_offset
    assert last == n + m - 1

    # The CLI follower, given the blob store: seeded from the snapshot, then exactly the M records after it.
    f = start(w, procs, "--blobstore", f"file://{w.tmp / 'blobs'}")
    caught_up(w, f)
    assert f.terminate() == 0, f.describe()
    result = f.result()
    assert result["records_applied"] == m, f.describe()
    assert result["applied_offset"] == last and result["reseeds"] == 0
    assert {line["seeded_from"] for line in f.status_lines()} == {snapshot}, f.describe()
    assert f"seeded from snapshot {snapshot}" in f.stderr()
    assert read_store(w.replica) == w.writer.state()
    assert offsets_of(w.replica) == {w.offset_key(): str(last)}

    # The engine's follow with a seed that restores the snapshot: the same, into another replica dir.
    seed, calls = seeder(w)
    other = Replica(w.ref, w.topic, 0, w.tmp / "host-2" / STORE / "Standby-Partition_0-0")
    r = follow_in_thread(other, w.bootstrap, last, seed=seed)
    assert calls == [snapshot]
    assert (r.records_applied, r.applied_offset, r.reseeds) == (m, last, 0)
    assert read_store(other.replica_dir) == w.writer.state()
    assert offsets_of(other.replica_dir) == {w.offset_key(): str(last)}

    # Without a seed (no blob store), the replica is bootstrapped from the whole changelog.
    third = Replica(w.ref, w.topic, 0, w.tmp / "host-3" / STORE / "Standby-Partition_0-0")
    r = follow_in_thread(third, w.bootstrap, last)
    assert (r.records_applied, r.applied_offset) == (n + m, last)
    assert read_store(third.replica_dir) == w.writer.state()


@pytest.mark.timeout(180)
def test_the_progress_shows_the_replicas_offset_and_lag(world: World):
    """standby follow's terminal line comes from the reporter's status: the replica's offset and lag as it
    catches up, its line ended when the follower stops."""
    from tests.tools.progress_recorder import Recorder

    w = world
    w.writer.send(random_records(random.Random(11), 400))
    rec = Recorder()
    replica = Replica(w.ref, w.topic, 0, w.replica)
    follow_in_thread(replica, w.bootstrap, w.writer.last_offset, progress=rec)
    shown = rec.statuses(f"replica {w.replica}")
    assert shown[-1] == {}  # the line ends with the follower
    figures = [s for s in shown if s and s["offset"] is not None]
    assert figures and figures[-1]["offset"] == w.writer.last_offset == 399 and figures[-1]["applied"] == 400
    assert [s["offset"] for s in figures] == sorted(s["offset"] for s in figures)
    assert figures[-1]["lag"] == 0 and figures[-1]["lag_s"] == 0.0


@pytest.mark.timeout(300)
def test_seeded_from_a_snapshot_without_offset_files(world: World):
    """A snapshot of a store that holds no OFFSET-v2 (a job's own store): the replica gets the offset files
    from the checkpoint's changelog position."""
    import rocksdict

    w = world
    n, m = 200, 150
    w.writer.send(random_records(random.Random(8), n))
    built = w.tmp / "active-host" / STORE / "Partition_0"
    built.parent.mkdir(parents=True)
    opts = rocksdict.Options(raw_mode=True)
    opts.create_if_missing(True)
    db = rocksdict.Rdict(str(built), opts)
    for k, v in w.writer.state(n - 1).items():
        db[k] = v
    db.close()
    (built / "rocksdict-config.json").unlink(missing_ok=True)
    assert not (built / OFFSET_V2).exists()
    snapshot = backup_with_changelog_position(w, built, n - 1)
    w.writer.send(random_records(random.Random(9), m))
    seed, calls = seeder(w)
    replica = Replica(w.ref, w.topic, 0, w.replica)
    r = follow_in_thread(replica, w.bootstrap, w.writer.last_offset, seed=seed)
    assert calls == [snapshot] and r.records_applied == m
    assert read_store(w.replica) == w.writer.state()
    assert offsets_of(w.replica) == {w.offset_key(): str(w.writer.last_offset)}


# -- 4. an offset out of range re-seeds -----------------------------------------------------------------


def plant(store: Path, key: bytes, value: bytes) -> None:
    import rocksdict

    db = rocksdict.Rdict(str(store), rocksdict.Options(raw_mode=True))
    db[key] = value
    db.close()


@pytest.mark.timeout(300)
def test_offset_past_the_end_reseeds_from_the_changelog(world: World, procs):
    w = world
    n = 300
    w.writer.send(random_records(random.Random(10), n))
    f = start(w, procs)
    caught_up(w, f)
    assert f.terminate() == 0, f.describe()
    # The replica now claims an offset the changelog never had (the topic recreated, say), and holds a key
    # no record wrote: a re-seed must start it anew.
    plant(w.replica, b"not-from-the-changelog", b"x")
    for name in (OFFSET_V2, SIDE_INPUT_OFFSETS):
        write_offsets(w.replica / name, {SSP("kafka", w.topic, 0): str(n + 100)})
    w.writer.send(random_records(random.Random(11), 50))
    last = w.writer.last_offset

    f = start(w, procs)
    caught_up(w, f)
    assert f.terminate() == 0, f.describe()
    result = f.result()
    assert result["reseeds"] == 1 and result["records_applied"] == last + 1, f.describe()
    assert "re-seeding" in f.stderr() and "fell off the changelog" in f.stderr(), f.describe()
    assert read_store(w.replica) == w.writer.state()
    assert offsets_of(w.replica) == {w.offset_key(): str(last)}


@pytest.mark.timeout(300)
def test_offset_past_the_end_reseeds_from_the_latest_snapshot(world: World, procs):
    w = world
    n = 400
    w.writer.send(random_records(random.Random(12), n))
    built = w.tmp / "active-host" / STORE / "Partition_0"
    cli_here(w.tmp, "restore", "--from-changelog", w.topic, "--partition", "0", "--kafka", w.bootstrap,
        "--target-dir", str(built))
    snapshot = backup_with_changelog_position(w, built, n - 1)
    w.writer.send(random_records(random.Random(13), 100))
    f = start(w, procs, "--blobstore", f"file://{w.tmp / 'blobs'}")
    caught_up(w, f)
    assert f.terminate() == 0 and f.result()["records_applied"] == 100, f.describe()

    plant(w.replica, b"not-from-the-changelog", b"x")
    for name in (OFFSET_V2, SIDE_INPUT_OFFSETS):
        write_offsets(w.replica / name, {SSP("kafka", w.topic, 0): str(10**6)})
    w.writer.send(random_records(random.Random(14), 60))
    last = w.writer.last_offset
    f = start(w, procs, "--blobstore", f"file://{w.tmp / 'blobs'}")
    caught_up(w, f)
    assert f.terminate() == 0, f.describe()
    result = f.result()
    # Re-seeded from the snapshot (offset n-1), then the 160 records after it.
    assert (result["reseeds"], result["records_applied"]) == (1, 160), f.describe()
    assert "re-seeding" in f.stderr() and f"seeded from snapshot {snapshot}" in f.stderr(), f.describe()
    assert read_store(w.replica) == w.writer.state()
    assert offsets_of(w.replica) == {w.offset_key(): str(last)}
    assert not [x for x in w.replica.parent.iterdir() if ".statectl-" in x.name]


@pytest.mark.timeout(300)
def test_a_snapshot_whose_position_is_past_the_end_does_not_reseed_forever(world: World):
    from statectl.errors import StatectlError
    from statectl.progress import NullProgress

    w = world
    n = 150
    w.writer.send(random_records(random.Random(24), n))
    built = w.tmp / "active-host" / STORE / "Partition_0"
    cli_here(w.tmp, "restore", "--from-changelog", w.topic, "--partition", "0", "--kafka", w.bootstrap,
        "--target-dir", str(built))
    # The job's latest checkpoint names a snapshot taken at offset 10**6 of a changelog since recreated.
    backup_with_changelog_position(w, built, 10**6)
    last = w.writer.last_offset
    stop = threading.Event()

    class Notes(NullProgress):
        def note(self, message: str) -> None:
            super().note(message)
            if sum("re-seeding" in n for n in self.notes) >= 5:
                stop.set()  # looping: give up

    def on_status(st) -> None:
        if st.applied_offset is not None and st.applied_offset >= last:
            stop.set()

    notes = Notes()
    seed, calls = seeder(w)
    out: list = []

    def run() -> None:
        try:
            out.append(follow(Replica(w.ref, w.topic, 0, w.replica), w.bootstrap, seed=seed, stop=stop,
                              on_status=on_status, progress=notes, status_every_s=0.05))
        except StatectlError as e:
            out.append(e)

    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(120)
    stop.set()
    th.join(30)
    assert not th.is_alive()
    reseeds = sum("re-seeding" in n for n in notes.notes)
    assert reseeds < 5, f"re-seeded {reseeds} times from snapshot(s) {sorted(set(calls))}"
    # Either it says it cannot follow from that snapshot, or it bootstraps from the changelog and is exact.
    if not isinstance(out[0], StatectlError):
        assert read_store(w.replica) == w.writer.state()
        assert offsets_of(w.replica) == {w.offset_key(): str(last)}


# -- 5. promote: the follower dead, a timeout, an old active store ------------------------------------------


@pytest.mark.timeout(300)
def test_promote_with_the_follower_killed_replaces_an_old_active_store(world: World, procs):
    w = world
    n, m = 400, 250
    w.writer.send(random_records(random.Random(15), n))
    f = start(w, procs)
    caught_up(w, f)
    wait_until(lambda: w.status_file.exists() and json.loads(w.status_file.read_text())["pid"] == f.pid, 30,
               "the follower's status file")
    f.kill()  # SIGKILL: its lock goes with it, its status file stays
    w.writer.send(random_records(random.Random(16), m))
    last = w.writer.last_offset
    rows = status_rows(w)
    assert [(r["following"], r["follower_pid"], r["promotable"]) for r in rows] == [(False, None, True)], rows

    make_store(w.active, 500, 64, sst_mb=1)  # the old active store on this host
    old = read_store(w.active)
    assert old and old != w.writer.state()
    r = json.loads(cli(w.tmp, "standby", "promote", *w.where(), NT, "-o", "json").stdout)
    assert r["caught_up_offset"] == last and r["records_applied"] == m
    assert r["replaced_active"] is True and r["locality_updated"] is False  # the job has no coordinator stream
    assert read_store(w.active) == w.reference_store() == w.writer.state()
    assert offsets_of(w.active) == {w.offset_key(): str(last)}
    assert not w.replica.exists()
    assert not [x for x in w.active.parent.iterdir() if x.name.startswith(".")], list(w.active.parent.iterdir())


@pytest.mark.timeout(300)
def test_promote_that_times_out_leaves_the_active_untouched_and_the_replica_consistent(world: World, procs):
    w = world
    n = 300
    w.writer.send(random_records(random.Random(17), n))
    f = start(w, procs)
    caught_up(w, f)
    assert f.terminate() == 0, f.describe()  # the follower is stopped...
    bulk = ChangelogWriter(w.bootstrap, w.topic, linger_ms=50, batch_size=1 << 20)
    try:  # ...while a tail of tens of thousands of records is written
        bulk.send([(b"bulk-%06d" % (i % 5000), None if i % 11 == 0 else b"v%d" % i) for i in range(30_000)])
    finally:
        bulk.close()
    records = sorted(w.writer.log + bulk.log)
    last = records[-1][0]
    assert last == n + 30_000 - 1

    for active_exists in (False, True):
        if active_exists:
            make_store(w.active, 200, 32, sst_mb=1)
            before = fingerprint(w.active)
        p = cli(w.tmp, "standby", "promote", *w.where(), NT, "--timeout", "0.001s", code=1)
        assert "timed out" in p.stderr and "Traceback" not in p.stderr, p.stderr
        if active_exists:
            assert fingerprint(w.active) == before
        else:
            assert not w.active.exists()
        # The replica keeps what it applied, and its offset says exactly that.
        offset = replica_offset(w.replica, w.topic)
        assert offset is not None and n - 1 <= offset < last
        assert dump_store(w.replica) == apply_records([r for r in records if r[0] <= offset])
        assert offsets_of(w.replica, SIDE_INPUT_OFFSETS) == {w.offset_key(): str(offset)}
        # No follower was running, so none was started again.
        assert not any(row["following"] for row in status_rows(w))

    r = json.loads(cli(w.tmp, "standby", "promote", *w.where(), NT, "--timeout", "120s", "-o",
                       "json").stdout)
    assert r["caught_up_offset"] == last and r["records_applied"] == last - offset
    assert r["replaced_active"] is True
    assert read_store(w.active) == apply_records(records) == w.reference_store()
    assert offsets_of(w.active) == {w.offset_key(): str(last)}


@pytest.mark.timeout(300)
def test_promote_that_times_out_starts_the_fenced_follower_again(world: World, procs):
    w = world
    n = 200
    w.writer.send(random_records(random.Random(18), n))
    f = start(w, procs)
    caught_up(w, f)
    wait_until(lambda: w.status_file.exists() and json.loads(w.status_file.read_text())["pid"] == f.pid, 30,
               "the follower's status file")
    os.kill(f.pid, signal.SIGSTOP)  # held, so that the tail below is still to be applied when promote fences it
    bulk = ChangelogWriter(w.bootstrap, w.topic, linger_ms=50)
    try:
        bulk.send([(b"bulk-%06d" % (i % 3000), b"v%d" % i) for i in range(40_000)])
    finally:
        bulk.close()
    records = sorted(w.writer.log + bulk.log)
    last = records[-1][0]
    proc = subprocess.Popen([STATECTL, "standby", "promote", *w.where(), NT, "--timeout", "0.001s"],
                            env=clean_env(w.tmp), cwd=w.tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    try:
        wait_until(lambda: sigterm_pending(f.pid) or proc.poll() is not None, 60, "promote fences the follower")
    finally:
        os.kill(f.pid, signal.SIGCONT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "timed out" in err, err
    assert f.wait(60) == 0, f.describe()
    assert not w.active.exists()

    # The fenced follower was started again (a new process) and catches up.
    def restarted() -> int | None:
        try:
            pid = json.loads(w.status_file.read_text())["pid"]
        except (OSError, ValueError, KeyError):
            return None
        return pid if pid != f.pid and alive(pid) else None

    pid = wait_until(restarted, 60, "the follower is started again")
    procs[1].append(pid)
    caught_up(w, upto=last)
    rows = status_rows(w)
    assert [(r["following"], r["follower_pid"]) for r in rows] == [(True, pid)], rows
    os.kill(pid, signal.SIGTERM)
    wait_until(lambda: not alive(pid), 60, "the restarted follower stops")
    assert read_store(w.replica) == apply_records(records)
    assert offsets_of(w.replica) == {w.offset_key(): str(last)}


@pytest.mark.timeout(300)
def test_promote_of_a_replica_past_the_changelogs_end_does_not_promote_a_wrong_store(world: World, procs):
    w = world
    n = 200
    w.writer.send(random_records(random.Random(25), n))
    f = start(w, procs)
    caught_up(w, f)
    assert f.terminate() == 0, f.describe()
    for name in (OFFSET_V2, SIDE_INPUT_OFFSETS):  # the topic was recreated: the replica's offset is past its end
        write_offsets(w.replica / name, {SSP("kafka", w.topic, 0): str(n + 100)})
    w.writer.send(random_records(random.Random(26), 50))
    last = w.writer.last_offset
    p = cli(w.tmp, "standby", "promote", *w.where(), NT, "-o", "json", code=None)
    if p.returncode != 0:  # refused: the active is untouched
        assert not w.active.exists(), p.stderr
        return
    r = json.loads(p.stdout)
    assert r["caught_up_offset"] == last, r
    assert read_store(w.active) == w.writer.state()
    assert offsets_of(w.active) == {w.offset_key(): str(last)}


@pytest.mark.timeout(300)
def test_a_timed_out_promote_restarts_a_follower_run_as_python_m_statectl(world: World, procs):
    w = world
    w.writer.send(random_records(random.Random(27), 100))
    f = start(w, procs, module=True)
    caught_up(w, f)
    wait_until(lambda: w.status_file.exists() and json.loads(w.status_file.read_text())["pid"] == f.pid, 30,
               "the follower's status file")
    os.kill(f.pid, signal.SIGSTOP)
    bulk = ChangelogWriter(w.bootstrap, w.topic, linger_ms=50)
    try:
        bulk.send([(b"bulk-%06d" % (i % 3000), b"v%d" % i) for i in range(40_000)])
    finally:
        bulk.close()
    last = max(o for o, _, _ in bulk.log)
    proc = subprocess.Popen([STATECTL, "standby", "promote", *w.where(), NT, "--timeout", "0.001s"],
                            env=clean_env(w.tmp), cwd=w.tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: sigterm_pending(f.pid) or proc.poll() is not None, 60, "promote fences the follower")
    finally:
        os.kill(f.pid, signal.SIGCONT)
    _, err = proc.communicate(timeout=120)
    assert f.wait(60) == 0, f.describe()
    assert proc.returncode == 1 and "timed out" in err, err

    def new_follower() -> bool:
        try:
            pid = json.loads(w.status_file.read_text())["pid"]
        except (OSError, ValueError, KeyError):
            return False
        if pid != f.pid and alive(pid):
            procs[1].append(pid)
            return True
        return False

    wait_until(new_follower, 60, "the follower is started again")
    caught_up(w, upto=last)


# -- 6. errors ----------------------------------------------------------------------------------------------


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("Error:")]


@pytest.mark.timeout(120)
def test_unreachable_brokers_exit_1_with_one_line(tmp_path: Path):
    (tmp_path / "state").mkdir()
    p = cli(tmp_path, "standby", "follow", "--kafka", "127.0.0.1:1", "--job", "j", "--task", TASK, "--store", STORE,
            "--state-dir", str(tmp_path / "state"), "--changelog", "some-changelog", code=1, timeout=100)
    assert error_lines(p.stderr) == [line for line in p.stderr.splitlines() if not line.startswith("Hint:")]
    assert len(error_lines(p.stderr)) == 1 and "cannot reach Kafka brokers 127.0.0.1:1" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and p.stdout == ""
    assert list((tmp_path / "state").iterdir()) == []  # nothing was made


@pytest.mark.timeout(120)
def test_no_such_changelog_exits_10(world: World):
    w = world
    missing = f"no-such-changelog-{uuid.uuid4().hex[:8]}"
    p = cli(w.tmp, "standby", "follow", "--kafka", w.bootstrap, "--job", w.job, "--task", TASK, "--store", STORE,
            "--state-dir", str(w.state), "--changelog", missing, code=10)
    assert missing in p.stderr and len(error_lines(p.stderr)) == 1, p.stderr
    assert not w.replica.exists()
    # No --changelog and no coordinator stream to read the job's config from: not found either.
    p = cli(w.tmp, "standby", "follow", *w.where(changelog=False), code=10)
    assert "coordinator stream" in p.stderr, p.stderr
    assert not w.replica.exists()


@pytest.mark.timeout(180)
def test_a_second_follower_exits_11_naming_the_first(world: World, procs):
    w = world
    w.writer.send(random_records(random.Random(19), 100))
    first = start(w, procs)
    caught_up(w, first)
    wait_until(lambda: w.status_file.exists(), 30, "the first follower's status")
    p = cli(w.tmp, "standby", "follow", *w.where(), code=11)
    assert f"pid {first.pid}" in p.stderr and len(error_lines(p.stderr)) == 1, p.stderr
    first.assert_running()
    w.writer.send(random_records(random.Random(20), 50))
    caught_up(w, first)  # the first one goes on
    assert first.terminate() == 0
    assert read_store(w.replica) == w.writer.state()


@pytest.mark.timeout(180)
def test_a_second_follower_names_the_lock_holder_not_a_dead_follower(world: World, procs):
    """A follower killed, another one holding the lock: a third names the holder (from the lock file, which
    the holder writes as it takes the lock), never the dead one."""
    w = world
    w.writer.send(random_records(random.Random(21), 100))
    dead = start(w, procs)
    caught_up(w, dead)
    wait_until(lambda: w.status_file.exists(), 30, "the first follower's status")
    dead.kill()
    holder = start(w, procs)
    wait_until(lambda: lock_holder_pid(w) == str(holder.pid), 60, f"the lock is taken\n{holder.describe()}")
    os.kill(holder.pid, signal.SIGSTOP)  # frozen before its first status write
    try:
        p = cli(w.tmp, "standby", "follow", *w.where(), code=11)
        assert f"pid {holder.pid}" in p.stderr and f"pid {dead.pid}" not in p.stderr, p.stderr
    finally:
        os.kill(holder.pid, signal.SIGCONT)


@pytest.mark.timeout(180)
def test_a_replica_held_open_by_another_process_exits_11(world: World, procs):
    import rocksdict

    w = world
    w.writer.send(random_records(random.Random(22), 100))
    f = start(w, procs)
    caught_up(w, f)
    assert f.terminate() == 0
    before = dump_store(w.replica)
    w.writer.send(random_records(random.Random(23), 30))
    db = rocksdict.Rdict(str(w.replica), rocksdict.Options(raw_mode=True))  # held read-write by this process
    try:
        p = cli(w.tmp, "standby", "follow", *w.where(), code=11)
        assert str(w.replica) in p.stderr and str(os.getpid()) in p.stderr, p.stderr
        assert len(error_lines(p.stderr)) == 1
    finally:
        db.close()
    assert dump_store(w.replica) == before
    f = start(w, procs)  # once released, a follower goes on from where the replica was
    caught_up(w, f)
    assert f.terminate() == 0 and f.result()["records_applied"] == 30, f.describe()
    assert read_store(w.replica) == w.writer.state()


# -- 7. placement ---------------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_check_reports_a_task_on_the_same_host_as_its_standby(tansu, tmp_path: Path):
    job = f"standby-check-{uuid.uuid4().hex[:10]}"
    args = ["standby", "check", "--kafka", tansu.bootstrap, "--job", job]
    p = cli(tmp_path, *args, code=10)
    assert "coordinator stream" in p.stderr
    with CoordinatorStream(tansu.bootstrap, job, "1") as cs:
        cs.create()
        cs.write_task_container(TASK, "0")
        cs.write_task_mode(TASK, "Active")
        cs.write_task_container("Standby-Partition 0-0", "0-0")
        cs.write_task_mode("Standby-Partition 0-0", "Standby")
        cs.write_container_host("0", "host-a.example.com")
        cs.write_container_host("0-0", "host-a.example.com")
    p = cli(tmp_path, *args, code=1)
    assert "Partition 0" in p.stdout and "Standby-Partition 0-0" in p.stdout and "host-a.example.com" in p.stdout
    assert "share a host" in p.stderr, p.stderr
    r = json.loads(cli(tmp_path, *args, "-o", "json", code=1).stdout)
    assert (r["tasks"], r["standbys"]) == (1, 1)
    assert r["violations"] == [{"task": TASK, "standby": "Standby-Partition 0-0", "host": "host-a.example.com",
                                "container": "0", "standby_container": "0-0"}]

    with CoordinatorStream(tansu.bootstrap, job, "1") as cs:
        cs.write_container_host("0-0", "host-b.example.com")
    p = cli(tmp_path, *args)
    assert "1 tasks, 1 standbys" in p.stdout, p.stdout
    r = json.loads(cli(tmp_path, *args, "-o", "json").stdout)
    assert r["violations"] == [] and (r["tasks"], r["standbys"]) == (1, 1)
