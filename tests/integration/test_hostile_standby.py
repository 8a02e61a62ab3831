"""statectl standby against what an operator or the world does wrong: a --replica-dir or --active-dir that is
someone else's dir (the job's active store, another store, a folder of plain files, a versioned adstore), a
failed promote run from another dir than the follower's, the changelog deleted and recreated under a running
follower (and under ``adstore load --follow``), the broker frozen longer than the client timeout, a store
held open by a process, a disk that fills. Real OS processes on a real Kafka-protocol broker (Tansu)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from statectl.formats.offsets import OFFSET_V2, SIDE_INPUT_OFFSETS, write_offsets
from statectl.formats.checkpoint import SSP
from tests.integration.test_bad_input import small_tmpfs  # noqa: F401 - a fixture: a 4 MiB tmpfs (root only)
from tests.integration.test_standby import (  # noqa: F401 - world and procs are fixtures
    NT,
    STORE,
    TASK,
    World,
    assert_consistent_after_kill,
    caught_up,
    error_lines,
    procs,
    sigterm_pending,
    start,
    status_rows,
    world,
)
from tests.servers import TansuServer
from tests.tools.genstore import fingerprint, make_store
from tests.tools.standby_helpers import (
    STATECTL,
    ChangelogWriter,
    Feeder,
    Follower,
    alive,
    apply_records,
    clean_env,
    cli,
    offsets_of,
    random_records,
    read_store,
    replica_offset,
    wait_until,
)


def tree(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` with its bytes (a dir of plain files, compared before and after)."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def one_error(stderr: str) -> str:
    lines = error_lines(stderr)
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def hint(stderr: str) -> str:
    return "\n".join(line for line in stderr.splitlines() if line.startswith("Hint:"))


def docs_dir(where: Path) -> Path:
    where.mkdir(parents=True)
    (where / "a.txt").write_text("the operator's notes\n")
    (where / "sub").mkdir()
    (where / "sub" / "b.txt").write_text("more\n")
    return where


def active_store_naming_the_changelog(w: World) -> Path:
    """The job's active store of the task, with the OFFSET-v2 a Samza active store writes: the same
    changelog partition a replica follows (so an offset file proves nothing about whose dir it is)."""
    make_store(w.active, 200, 32, sst_mb=1)
    for name in (OFFSET_V2, SIDE_INPUT_OFFSETS):
        write_offsets(w.active / name, {SSP("kafka", w.topic, 0): "5"})
    return w.active


# -- 1. follow seeds, wipes and re-seeds only a dir it made -------------------------------------------------


@pytest.mark.timeout(300)
def test_follow_refuses_a_replica_dir_it_did_not_make(world: World, procs):
    w = world
    w.writer.send(random_records(random.Random(101), 120))
    active = active_store_naming_the_changelog(w)
    other = w.state / "other-store" / "Partition_0"
    make_store(other, 100, 32, sst_mb=1)
    docs = docs_dir(w.tmp / "docs")
    before = {p: fingerprint(p) for p in (active, other)}
    docs_before = tree(docs)

    for target, what in ((active, "active store dir"), (other, "RocksDB store"), (docs, "not empty")):
        p = cli(w.tmp, "standby", "follow", *w.where(), "--replica-dir", str(target), code=2)
        line = one_error(p.stderr)
        assert "refusing to follow into" in line and str(target) in line and what in line, p.stderr
        assert hint(p.stderr), p.stderr
        assert not target.with_name(target.name + ".standby.json").exists()
        assert not target.with_name(target.name + ".standby.lock").exists()
    # The active dir by its relative path too (the follower's cwd is the test's dir).
    p = cli(w.tmp, "standby", "follow", *w.where(), "--replica-dir",
            str(active.relative_to(w.tmp)), code=2)
    assert "active store dir" in one_error(p.stderr)
    assert {p: fingerprint(p) for p in (active, other)} == before
    assert tree(docs) == docs_before
    # A dir inside a store is refused too (it would put a store inside the job's).
    p = cli(w.tmp, "standby", "follow", *w.where(), "--replica-dir", str(other / "nested"), code=2)
    assert "inside the RocksDB store" in one_error(p.stderr)
    assert not (other / "nested").exists()

    # An empty dir is the follower's to fill; once it made it, it goes on with it, and re-seeds it.
    empty = w.tmp / "elsewhere" / "replica"
    empty.mkdir(parents=True)
    f = start(w, procs, "--replica-dir", str(empty))
    wait_until(lambda: replica_offset(empty, w.topic) == w.writer.last_offset, 90, f.describe())
    assert f.terminate() == 0, f.describe()
    for name in (OFFSET_V2, SIDE_INPUT_OFFSETS):  # its offset fell off the changelog: a re-seed wipes it
        write_offsets(empty / name, {SSP("kafka", w.topic, 0): str(10**6)})
    w.writer.send(random_records(random.Random(102), 30))
    f = start(w, procs, "--replica-dir", str(empty))
    wait_until(lambda: replica_offset(empty, w.topic) == w.writer.last_offset, 90, f.describe())
    assert f.terminate() == 0 and f.result()["reseeds"] == 1, f.describe()
    assert read_store(empty) == w.writer.state()


@pytest.mark.timeout(300)
def test_a_promoted_replica_is_not_a_replica_any_more(world: World, procs):
    """What promote made the active store carries nothing that lets a follower take it for its replica."""
    w = world
    w.writer.send(random_records(random.Random(103), 150))
    f = start(w, procs)
    caught_up(w, f)
    cli(w.tmp, "standby", "promote", *w.where(), NT)
    assert f.wait(60) == 0, f.describe()
    promoted = read_store(w.active)
    assert promoted == w.writer.state()
    assert not list(w.active.parent.glob("*.standby.*")), list(w.active.parent.iterdir())
    p = cli(w.tmp, "standby", "follow", *w.where(), "--replica-dir", str(w.active), code=2)
    assert "refusing to follow into" in one_error(p.stderr)
    assert read_store(w.active) == promoted


# -- 3. promote replaces only an empty dir or a store, never another store's ------------------------------


@pytest.mark.timeout(300)
def test_promote_refuses_an_active_dir_that_is_not_its_to_replace(world: World, procs):
    w = world
    w.writer.send(random_records(random.Random(104), 150))
    f = start(w, procs)
    caught_up(w, f)
    docs = docs_dir(w.tmp / "docs")
    docs_before = tree(docs)
    other = w.state / "other-store" / "Partition_0"
    make_store(other, 100, 32, sst_mb=1)
    other_before = fingerprint(other)
    # A versioned adstore: S -> S.versions/1 (statectl.local.versions), here in the state dir of another store.
    versioned = w.state / "ads" / "Partition_0"
    make_store(versioned.with_name("Partition_0.versions") / "1", 50, 16, sst_mb=1)
    versioned.symlink_to("Partition_0.versions/1")
    versioned_before = fingerprint(versioned.with_name("Partition_0.versions") / "1")

    for target, what in ((docs, "not empty"), (other, "another store's dir"), (versioned, "versioned adstore"),
                         (w.replica, "into itself")):
        p = cli(w.tmp, "standby", "promote", *w.where(), NT, "--active-dir", str(target), code=2)
        line = one_error(p.stderr)
        assert what in line and "restore" not in line, p.stderr
        assert "--target-dir" not in p.stderr and "--force" not in p.stderr, p.stderr
        f.assert_running()  # refused before the follower is fenced
    assert tree(docs) == docs_before
    assert fingerprint(other) == other_before
    assert os.readlink(versioned) == "Partition_0.versions/1"
    assert fingerprint(versioned.with_name("Partition_0.versions") / "1") == versioned_before
    assert not w.active.exists()
    assert status_rows(w)[0]["following"] is True

    # The active store of the task, an empty dir, a new dir: promoted.
    empty = w.tmp / "empty-active"
    empty.mkdir()
    r = json.loads(cli(w.tmp, "standby", "promote", *w.where(), NT, "--active-dir", str(empty), "-o",
                       "json").stdout)
    assert r["promoted_dir"] == str(empty) and read_store(empty) == w.writer.state()
    assert f.wait(60) == 0, f.describe()


@pytest.mark.timeout(120)
def test_promote_moves_only_a_replica_a_follower_made(world: World):
    """--replica-dir naming the job's active store (its OFFSET-v2 names the changelog): never moved away."""
    w = world
    w.writer.send(random_records(random.Random(120), 30))
    active = active_store_naming_the_changelog(w)
    before = fingerprint(active)
    target = w.tmp / "new-active"
    p = cli(w.tmp, "standby", "promote", *w.where(), "--replica-dir", str(active), "--active-dir", str(target),
            code=2)
    assert "follower did not make it" in one_error(p.stderr) and hint(p.stderr), p.stderr
    assert fingerprint(active) == before and not target.exists()


@pytest.mark.timeout(300)
def test_promote_over_a_held_active_store_exits_11_with_its_own_hint(world: World, procs):
    import rocksdict

    w = world
    w.writer.send(random_records(random.Random(105), 100))
    f = start(w, procs)
    caught_up(w, f)
    make_store(w.active, 100, 32, sst_mb=1)
    before = fingerprint(w.active)
    db = rocksdict.Rdict(str(w.active), rocksdict.Options(raw_mode=True))  # the job holds its store
    try:
        p = cli(w.tmp, "standby", "promote", *w.where(), NT, code=11)
    finally:
        db.close()
    assert str(w.active) in one_error(p.stderr)
    assert "--checkpoint-dir" not in p.stderr and "promote" in hint(p.stderr), p.stderr
    f.assert_running()
    assert fingerprint(w.active) == before
    assert f.terminate() == 0

    # A replica held open: follow's hint is its own too.
    db = rocksdict.Rdict(str(w.replica), rocksdict.Options(raw_mode=True))
    try:
        p = cli(w.tmp, "standby", "follow", *w.where(), code=11)
    finally:
        db.close()
    assert "--checkpoint-dir" not in p.stderr and hint(p.stderr), p.stderr


# -- 7. a failed promote restarts the follower where it ran ------------------------------------------------


@pytest.mark.timeout(300)
def test_a_failed_promote_restarts_the_follower_in_its_own_dir(world: World, procs):
    w = world
    w.writer.send(random_records(random.Random(106), 100))
    relative = ["--kafka", w.bootstrap, "--job", w.job, "--task", TASK, "--store", STORE, "--state-dir", "state",
                "--changelog", w.topic, "--partition", "0"]
    f = Follower(w.tmp, relative)  # cwd: w.tmp, so "state" is w.state
    procs[0].append(f)
    caught_up(w, f)
    wait_until(lambda: w.status_file.exists() and json.loads(w.status_file.read_text())["pid"] == f.pid, 30,
               "the follower's status file")
    os.kill(f.pid, signal.SIGSTOP)  # held, so that the tail below is still to be applied when promote fences it
    bulk = ChangelogWriter(w.bootstrap, w.topic, linger_ms=50)
    try:
        bulk.send([(b"bulk-%06d" % (i % 3000), b"v%d" % i) for i in range(40_000)])
    finally:
        bulk.close()
    last = max(o for o, _, _ in bulk.log)
    elsewhere = w.tmp / "ops-shell"
    elsewhere.mkdir()
    proc = subprocess.Popen([STATECTL, "standby", "promote", *w.where(), NT, "--timeout", "0.001s"],
                            env=clean_env(w.tmp), cwd=elsewhere, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    try:
        wait_until(lambda: sigterm_pending(f.pid) or proc.poll() is not None, 60, "promote fences the follower")
    finally:
        os.kill(f.pid, signal.SIGCONT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "timed out" in err, err
    assert f.wait(60) == 0, f.describe()

    def restarted() -> int | None:
        try:
            st = json.loads(w.status_file.read_text())
        except (OSError, ValueError):
            return None
        return st["pid"] if st["pid"] != f.pid and alive(st["pid"]) else None

    pid = wait_until(restarted, 60, f"the follower of {w.replica} is started again")
    procs[1].append(pid)
    assert json.loads(w.status_file.read_text())["follower"]["state_dir"] == str(w.state)  # absolute: "state" in w.tmp
    caught_up(w, upto=last)
    assert not (elsewhere / "state").exists(), list(elsewhere.rglob("*"))


# -- 8. the changelog deleted and recreated under a running follower ---------------------------------------


def recreate_topic(bootstrap: str, topic: str) -> None:
    """Delete ``topic`` and create it again (one partition), waiting until the broker lists it anew."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_topics([topic])
        wait_until(lambda: topic not in admin.list_topics(), 30, f"{topic} is deleted")
        admin.create_topics([NewTopic(topic, 1, 1)])
        wait_until(lambda: topic in admin.list_topics(), 30, f"{topic} is created again")
    finally:
        admin.close()


@pytest.mark.timeout(300)
def test_a_running_follower_reseeds_when_its_changelog_is_recreated(world: World, procs):
    w = world
    n = 200
    w.writer.send(random_records(random.Random(107), n))
    f = start(w, procs)
    caught_up(w, f)
    reseeds_noted = 0

    # Recreated shorter: the follower's position is past the new end (Tansu then polls nothing, silently).
    for seed, m in ((108, 60), (109, 3 * n)):  # then recreated longer: a position inside the new log
        recreate_topic(w.bootstrap, w.topic)
        w.writer.close()
        w.writer = ChangelogWriter(w.bootstrap, w.topic)
        w.writer.send(random_records(random.Random(seed), m, keys=120))
        # Noticed (the replica's old offset is gone by the time it says so), then re-seeded and caught up.
        wait_until(lambda: f.stderr().count("deleted and recreated") > reseeds_noted, 60, f.describe())
        reseeds_noted = f.stderr().count("deleted and recreated")
        caught_up(w, f)
        assert read_store(w.replica) == w.writer.state(), f.describe()
        wait_until(lambda: (status_rows(w)[0]["applied_offset"], status_rows(w)[0]["lag_records"])
                   == (w.writer.last_offset, 0), 60, "the status tells the new position")
    assert f.terminate() == 0, f.describe()
    assert f.result()["reseeds"] == 2, f.describe()
    assert offsets_of(w.replica) == {w.offset_key(): str(w.writer.last_offset)}


@pytest.mark.timeout(300)
def test_a_follower_started_after_the_changelog_was_recreated_reseeds(world: World, procs):
    """Recreated (and written past the replica's offset) while no follower ran: the topic id the last
    follower recorded tells."""
    w = world
    w.writer.send(random_records(random.Random(110), 100))
    f = start(w, procs)
    caught_up(w, f)
    wait_until(lambda: json.loads(w.status_file.read_text()).get("topic_id"), 30, "the status names the topic id")
    assert f.terminate() == 0
    recreate_topic(w.bootstrap, w.topic)
    w.writer.close()
    w.writer = ChangelogWriter(w.bootstrap, w.topic)
    w.writer.send(random_records(random.Random(111), 250, keys=80))
    f = start(w, procs)
    caught_up(w, f)
    assert f.terminate() == 0, f.describe()
    assert "deleted and recreated" in f.stderr() and f.result()["reseeds"] == 1, f.describe()
    assert read_store(w.replica) == w.writer.state()


@pytest.mark.timeout(300)
def test_adstore_follow_stops_when_its_topic_is_recreated(tansu, tmp_path: Path):
    topic = tansu.create_topic(f"adstore-recreated-{uuid.uuid4().hex[:8]}")
    writer = ChangelogWriter(tansu.bootstrap, topic)
    store = tmp_path / "state" / "members" / "Partition_0"
    args = ["adstore", "load", "--kafka", tansu.bootstrap, "--topic", topic, "--store", "members",
            "--state-dir", str(tmp_path / "state")]
    try:
        writer.send(random_records(random.Random(112), 150))
        err_path = tmp_path / "follow.err"
        with open(err_path, "wb") as err:
            proc = subprocess.Popen([STATECTL, *args, "--follow"], env=clean_env(tmp_path), cwd=tmp_path,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        try:
            key = f"kafka.{topic}.0"
            wait_until(lambda: offsets_of(store, SIDE_INPUT_OFFSETS) == {key: str(writer.last_offset)}, 60,
                       err_path.read_text())
            # What it applied of the old topic: every record (a read-only open of the store while the
            # load writes it may miss what a concurrent flush moves out of the WAL).
            old = writer.state()
            recreate_topic(tansu.bootstrap, topic)
            writer.close()
            writer = ChangelogWriter(tansu.bootstrap, topic)
            writer.send(random_records(random.Random(113), 40))
            assert proc.wait(120) == 1, err_path.read_text()
        finally:
            proc.kill()
            proc.wait(30)
        stderr = err_path.read_text()
        line = one_error(stderr)
        assert topic in line and "deleted and recreated" in line, stderr
        assert offsets_of(store, SIDE_INPUT_OFFSETS) == {key: "149"}  # what it had applied of the old topic
        assert read_store(store) == old
        # The next load sees offsets that are not the new topic's and rebuilds the store from it.
        r = json.loads(cli(tmp_path, *args, "-o", "json").stdout)
        assert [s["case"] for s in r["stores"]] == ["rebuilt"], r
        assert read_store(store) == writer.state()
    finally:
        writer.close()


# -- 11c. the broker frozen longer than the client's timeout ------------------------------------------------


@pytest.mark.soak  # 48 s (a broker frozen past the follower's timeout, then thawed); make soak runs it
@pytest.mark.timeout(420)
def test_the_follower_rides_out_a_broker_frozen_longer_than_its_timeout(tmp_path: Path, procs):
    server = TansuServer().start()  # a broker of its own: freezing the shared one would stall other tests
    try:
        topic = server.create_topic(f"standby-frozen-{uuid.uuid4().hex[:8]}")
        (tmp_path / "state").mkdir()
        w = World(server.bootstrap, tmp_path, f"standby-frozen-{uuid.uuid4().hex[:8]}", topic,
                  ChangelogWriter(server.bootstrap, topic))
        try:
            w.writer.send(random_records(random.Random(114), 200))
            f = start(w, procs)
            caught_up(w, f)
            wait_until(lambda: w.status_file.exists(), 30, "the status file")
            os.kill(server._proc.pid, signal.SIGSTOP)
            try:
                # Longer than the 30 s a request may take: every request the follower makes meanwhile fails.
                deadline = time.monotonic() + 45
                while time.monotonic() < deadline:
                    f.assert_running()
                    time.sleep(0.5)
            finally:
                os.kill(server._proc.pid, signal.SIGCONT)
            f.assert_running()
            w.writer.send(random_records(random.Random(115), 300))
            caught_up(w, f)
            wait_until(lambda: status_rows(w)[0]["lag_records"] == 0, 60, "the lag is measured again")
            assert f.terminate() == 0, f.describe()
            assert read_store(w.replica) == w.writer.state()
            assert "following on" in f.stderr(), f.describe()
        finally:
            w.writer.close()
    finally:
        server.stop()


# -- 11. a full disk -----------------------------------------------------------------------------------------


def follower_env(tmp: Path, failpoints: str) -> dict[str, str]:
    return dict(clean_env(tmp), STATECTL_FAILPOINTS=failpoints)


@pytest.mark.timeout(300)
def test_a_full_disk_stops_the_follower_with_disk_full_and_nothing_half_written(world: World, procs):
    w = world
    w.writer.send(random_records(random.Random(116), 100))
    f = start(w, procs)
    caught_up(w, f)
    assert f.terminate() == 0
    proc = subprocess.Popen([STATECTL, "standby", "follow", *w.where()], cwd=w.tmp, stdin=subprocess.DEVNULL,
                            env=follower_env(w.tmp, "standby-apply=1*off->raise:ENOSPC"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        w.writer.send([(b"one-record", b"fits")])  # one record: one batch, applied and recorded
        wait_until(lambda: proc.poll() is not None or replica_offset(w.replica, w.topic) == w.writer.last_offset, 90,
                   "the first batch is applied")
        w.writer.send(random_records(random.Random(117), 200))  # the next batch finds the disk full
        _, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait(30)
    p = subprocess.CompletedProcess(proc.args, proc.returncode, "", stderr)
    assert p.returncode == 1, (p.returncode, p.stderr)
    line = one_error(p.stderr)
    assert "no space left on device" in line and str(w.replica) in line, p.stderr
    assert_consistent_after_kill(w)  # its offset is covered by its content, which is a prefix of the changelog
    assert not [x.name for x in w.replica.iterdir() if x.name.endswith(".tmp")]
    # Space again: it goes on from there.
    f = start(w, procs)
    caught_up(w, f)
    assert f.terminate() == 0
    assert read_store(w.replica) == w.writer.state()

    # Promote with the disk full while it catches up: disk full, the active dir untouched.
    make_store(w.active, 100, 32, sst_mb=1)
    before = fingerprint(w.active)
    w.writer.send(random_records(random.Random(118), 50))
    p = subprocess.run([STATECTL, "standby", "promote", *w.where(), NT],
                       env=follower_env(w.tmp, "standby-apply=raise:ENOSPC"),
                       cwd=w.tmp, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert "no space left on device" in one_error(p.stderr), p.stderr
    assert fingerprint(w.active) == before
    r = json.loads(cli(w.tmp, "standby", "promote", *w.where(), NT, "-o", "json").stdout)
    assert r["caught_up_offset"] == w.writer.last_offset
    assert read_store(w.active) == w.writer.state() == apply_records(w.writer.records())


@pytest.mark.timeout(300)
def test_a_disk_that_really_fills_stops_the_follower_with_disk_full(world: World, procs, small_tmpfs: Path):
    """RocksDB's own "No space left on device" (its WAL on a 4 MiB tmpfs), not an injected OSError."""
    w = world
    replica = small_tmpfs / "replica"
    w.writer.send([(b"small-%d" % i, b"v") for i in range(20)])
    f = start(w, procs, "--replica-dir", str(replica))
    wait_until(lambda: replica_offset(replica, w.topic) == w.writer.last_offset, 90, f.describe())
    big = ChangelogWriter(w.bootstrap, w.topic, linger_ms=20)
    try:  # about 12 MiB of values that do not compress: more than the tmpfs holds
        rng = random.Random(119)
        for chunk in range(12):
            big.send([(b"big-%d-%d" % (chunk, i), rng.randbytes(64 * 1024)) for i in range(16)])
    finally:
        big.close()
    assert f.wait(120) == 1, f.describe()
    line = one_error(f.stderr())
    assert "no space left on device" in line and str(replica) in line, f.describe()
    assert "Traceback" not in f.stderr()
    offset = replica_offset(replica, w.topic)
    assert offset is not None and offset >= 19  # what it recorded, it holds
    assert not [x.name for x in replica.iterdir() if x.name.endswith(".tmp")]
    assert not [x.name for x in small_tmpfs.iterdir() if x.name.endswith(".tmp")]


@pytest.mark.timeout(300)
def test_a_replica_on_another_filesystem_than_the_state_dir_is_not_promoted(world: World, procs, small_tmpfs: Path):
    """A promote's move into the state dir is one rename, which another filesystem cannot take: a standby root there
    is refused by follow, a --replica-dir there by promote (exit 2), before the follower is fenced."""
    w = world
    w.writer.send([(b"k-%d" % i, b"v") for i in range(30)])
    p = cli(w.tmp, "standby", "follow", *w.where(), "--standby-root", str(small_tmpfs / "root"), code=2)
    assert "another filesystem" in one_error(p.stderr) and not (small_tmpfs / "root").exists()
    replica = small_tmpfs / "replica"
    f = start(w, procs, "--replica-dir", str(replica))
    wait_until(lambda: replica_offset(replica, w.topic) == w.writer.last_offset, 90, f.describe())
    for extra in (["--dry-run"], []):
        p = cli(w.tmp, "standby", "promote", *w.where(), "--replica-dir", str(replica), NT, *extra, code=2)
        assert "different filesystems" in one_error(p.stderr), p.stderr
    f.assert_running()  # not fenced
    assert not w.active.exists() and read_store(replica) == w.writer.state()


@pytest.mark.timeout(300)
def test_an_adstore_whose_topic_was_recreated_longer_is_rebuilt_not_resumed(tansu, tmp_path: Path):
    """The topic deleted and recreated with more records than the store's offsets: the offsets are in
    range of the new topic, so only the topic id the load recorded tells that they are another topic's.
    Resuming would skip the new topic's first records and keep the old topic's keys."""
    topic = tansu.create_topic(f"adstore-recreated-longer-{uuid.uuid4().hex[:8]}")
    store = tmp_path / "state" / "members" / "Partition_0"
    args = ["adstore", "load", "--kafka", tansu.bootstrap, "--topic", topic, "--store", "members",
            "--state-dir", str(tmp_path / "state"), "-o", "json"]
    writer = ChangelogWriter(tansu.bootstrap, topic)
    try:
        writer.send(random_records(random.Random(121), 30))
        r = json.loads(cli(tmp_path, *args).stdout)
        assert [s["case"] for s in r["stores"]] == ["created"], r
        recreate_topic(tansu.bootstrap, topic)
        writer.close()
        writer = ChangelogWriter(tansu.bootstrap, topic)
        writer.send(random_records(random.Random(122), 90))
        r = json.loads(cli(tmp_path, *args).stdout)
        assert [s["case"] for s in r["stores"]] == ["rebuilt"], r
        assert "deleted and recreated" in r["stores"][0]["reason"]
        assert read_store(store) == writer.state()
        r = json.loads(cli(tmp_path, *args).stdout)  # and from then on it resumes
        assert [s["case"] for s in r["stores"]] == ["resumed"], r
    finally:
        writer.close()


def test_negative_partitions_replicas_and_empty_topics_are_usage_errors(tmp_path: Path):
    """Checked before any broker is asked (they reached the brokers, exit 1 when these were down)."""
    state = tmp_path / "state"
    where = ["--kafka", "127.0.0.1:1", "--store", "s", "--state-dir", str(state)]
    for args, words in ((["standby", "follow", "--job", "j", "--changelog", "cl", "--partition", "-1"], "--partition"),
                        (["standby", "follow", "--job", "j", "--changelog", "cl", "--replica", "-1"], "--replica"),
                        (["standby", "promote", "--job", "j", "--changelog", "cl", "--partition", "-2"], "--partition"),
                        (["adstore", "load", "--topic", ""], "topic")):
        p = cli(tmp_path, *args, *where, code=2)
        assert words in one_error(p.stderr), p.stderr
    assert not state.exists()
