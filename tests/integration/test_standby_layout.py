"""Where a standby replica lives, end to end with real followers on a real Kafka-protocol broker (Tansu) and real
RocksDB stores: beside the job's state dir, never in it, so that a Samza-like restore scan and a container start
without a checkpoint (which clears the whole state dir, ContainerStorageManager.clearLoggedStores) delete nothing
of it while a follower runs, and the replica then promotes; a replica an older statectl kept in the state dir
(``<state>/.statectl-standby/...`` or ``<store>/Standby-<task>-<n>``) is listed by ``status`` with the command that
moves it, moved by ``follow`` (data and offset kept, never from under its follower) and found by ``promote``;
``--layout active-path`` is refused where this host runs the task's active, or where a container of the job placed
here clears the state dir at its start, and accepted elsewhere, adopting a Samza standby's dir, and promote then
moves nothing."""

from __future__ import annotations

import fcntl
import json
import os
import random
import socket
import sys
import threading
from pathlib import Path

import pytest

from statectl.engine.standby.follower import FollowerSettings
from statectl.engine.standby.follow import follow
from statectl.engine.standby.replica import Replica, legacy_standby_dir, old_root_standby_dir
from statectl.formats.checkpoint import SSP, CheckpointV1
from statectl.formats.offsets import OFFSET_V2, SIDE_INPUT_OFFSETS, write_offsets
from statectl.kafka.coordinator import CoordinatorStream
from statectl.local.layout import samza_would_take
from tests.integration.test_standby import (  # noqa: F401 - world and procs are fixtures
    NT,
    STORE,
    TASK,
    World,
    caught_up,
    error_lines,
    procs,
    start,
    status_rows,
    world,
)
from tests.tools.samza_scan import clear_logged_stores, restore_like_samza
from tests.tools.standby_helpers import (
    apply_records,
    cli,
    offsets_of,
    random_records,
    read_store,
    replica_offset,
    wait_until,
    write_checkpoint_record,
)

TASKS = ["Partition 0", "Partition 1", "Partition 10", "task", "task-a", "a.b", "my.task-1"]


def one_error(stderr: str) -> str:
    lines = error_lines(stderr)
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def legacy(w: World) -> Path:
    return legacy_standby_dir(w.state, STORE, TASK)


def make_old_layout_replica(w: World, path: Path | None = None, *, settings: bool = False) -> Path:
    """A replica as an older statectl made it by default: ``<state>/<store>/Standby-Partition_0-0`` (or ``path``),
    its status file beside it naming it (the engine's follower run in this process into that dir), caught up
    to the changelog's end, then stopped; its status file then as an older statectl wrote it: the follower's
    command line, no settings (``settings``: the follower's recorded settings, as a newer one writes them)."""
    path = path or legacy(w)
    stop = threading.Event()
    done: list[object] = []
    recorded = FollowerSettings(w.bootstrap, w.job, "1", state_dir=str(w.state), task=TASK, store=STORE,
                                changelog=f"kafka.{w.topic}", partition=0)

    def run() -> None:
        try:
            done.append(follow(Replica(w.ref, w.topic, 0, path), w.bootstrap, stop=stop,
                               settings=recorded if settings else None))
        except BaseException as e:  # noqa: BLE001 - reported below
            done.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    wait_until(lambda: done or replica_offset(path, w.topic) == w.writer.last_offset, 90, "the old replica catches up")
    stop.set()
    t.join(60)
    assert not t.is_alive() and done and not isinstance(done[0], BaseException), done
    if settings:
        return path
    status = path.with_name(path.name + ".standby.json")
    st = {k: v for k, v in json.loads(status.read_text()).items() if k != "follower"}
    status.write_text(json.dumps(dict(st, argv=[sys.executable, "-m", "statectl", "standby", "follow", *w.where()],
                                      cwd=str(w.tmp))))
    return path


def samza_standby_dir(w: World, upto: int) -> None:
    """The active's store dir as a Samza standby container leaves it: the changelog applied up to record
    ``upto`` (exclusive), OFFSET-v2 and SIDE-INPUT-OFFSETS naming the last one applied."""
    import rocksdict

    records = w.writer.records()[:upto]
    db = rocksdict.Rdict(str(w.active), rocksdict.Options(raw_mode=True))
    try:
        for k, v in apply_records(records).items():
            db[k] = v
    finally:
        db.close()
    for name in (OFFSET_V2, SIDE_INPUT_OFFSETS):
        write_offsets(w.active / name, {SSP("kafka", w.topic, 0): str(records[-1][0])})


# -- the default layout survives Samza's clean-ups ---------------------------------------------------------


@pytest.mark.timeout(300)
def test_a_samza_restore_scan_of_the_state_dir_deletes_nothing_of_a_running_followers_replica(world: World, procs):
    w = world
    w.writer.send(random_records(random.Random(181), 200))
    f = start(w, procs)
    caught_up(w, f)
    assert w.state not in w.replica.parents and w.replica.parents[2] == w.tmp / "state.statectl-standby"
    # The job's own dirs, which the scan must delete (so it is a scan that deletes).
    for task in TASKS:
        d = w.state / STORE / task.replace(" ", "_")
        d.mkdir(parents=True, exist_ok=True)
        d.with_name(d.name + "-1700000000000-123").mkdir()
    gone = restore_like_samza(w.state, [STORE, "other-store"], TASKS)
    assert w.state / STORE / "Partition_0-1700000000000-123" in gone
    assert not [p for p in gone if w.replica.parents[2] in p.parents], gone
    assert w.replica.is_dir() and w.lock_file.exists() and w.status_file.exists()
    f.assert_running()
    w.writer.send(random_records(random.Random(182), 150))  # it keeps following, into the same dir
    caught_up(w, f)
    assert f.terminate() == 0, f.describe()
    assert read_store(w.replica) == w.writer.state()
    rows = status_rows(w)
    assert [(r["replica_dir"], r["layout"]) for r in rows] == [(str(w.replica), "standby-root")]


@pytest.mark.timeout(300)
def test_a_container_start_that_clears_the_state_dir_leaves_the_replica_which_then_promotes(world: World, procs):
    w = world
    w.writer.send(random_records(random.Random(191), 250))
    f = start(w, procs)  # by default: no --replica-dir, no --standby-root
    caught_up(w, f)
    assert w.state not in w.replica.parents and w.state not in w.status_file.parents
    # The job's own state: a store, a checkpoint dir, a dot dir of its own.
    for d in (w.state / STORE / "Partition_1", w.state / STORE / "Partition_1-1700000000000-1",
              w.state / ".samza-own"):
        d.mkdir(parents=True)
    # A Samza container starting on this host without a checkpoint (a standby container, a new job) clears
    # every entry of the state dir: ContainerStorageManager.clearLoggedStores.
    gone = clear_logged_stores(w.state)
    assert sorted(gone) == sorted([w.state / STORE, w.state / ".samza-own"]) and not any(w.state.iterdir())
    f.assert_running()
    assert w.replica.is_dir() and w.lock_file.exists() and w.status_file.exists()
    w.writer.send(random_records(random.Random(192), 80))  # it keeps following, into the same dir
    caught_up(w, f)
    rows = status_rows(w)
    assert [(r["replica_dir"], r["layout"], r["following"]) for r in rows] == [(str(w.replica), "standby-root", True)]

    tail = w.writer.send(random_records(random.Random(193), 30))
    p = cli(w.tmp, "standby", "promote", *w.where(), NT, "-o", "json")
    r = json.loads(p.stdout)
    assert f.wait(60) == 0, f.describe()
    assert r["promoted_dir"] == str(w.active) and r["caught_up_offset"] == tail[-1], r
    assert read_store(w.active) == w.writer.state() == w.reference_store()
    assert offsets_of(w.active) == {w.offset_key(): str(tail[-1])}
    assert not w.replica.exists() and not w.status_file.exists() and not w.lock_file.exists()


@pytest.mark.timeout(300)
def test_a_standby_root_in_the_state_dir_is_refused_and_one_elsewhere_is_used_and_recorded(world: World, procs):
    w = world
    w.writer.send(random_records(random.Random(194), 120))
    inside = w.state / "standby"
    p = cli(w.tmp, "standby", "follow", *w.where(), "--standby-root", str(inside), code=2)
    assert "in the state dir" in one_error(p.stderr) and not inside.exists()
    root = w.tmp / "elsewhere" / "replicas"
    f = start(w, procs, "--standby-root", str(root))
    replica = root / "0" / STORE / "Partition_0"
    wait_until(lambda: replica_offset(replica, w.topic) == w.writer.last_offset, 90, f"caught up\n{f.describe()}")
    st = json.loads((replica.parent / "Partition_0.standby.json").read_text())
    assert st["follower"]["standby_root"] == str(root) and st["follower"]["state_dir"] == str(w.state)
    assert status_rows(w) == []  # not in the default root
    rows = json.loads(cli(w.tmp, "standby", "status", "--state-dir", str(w.state), "--standby-root", str(root),
                          "-o", "json").stdout)
    assert [(r["replica_dir"], r["layout"]) for r in rows] == [(str(replica), "standby-root")]
    env_rows = json.loads(cli(w.tmp, "standby", "status", "--state-dir", str(w.state), "-o", "json",
                              env={"STATECTL_STANDBY_ROOT": str(root)}).stdout)
    def stable(rs):  # the offset, lag and time move between two status calls while the follower runs
        return [(r["replica_dir"], r["layout"], r["changelog"], r["partition"]) for r in rs]

    assert stable(env_rows) == stable(rows)
    p = cli(w.tmp, "standby", "promote", *w.where(), "--standby-root", str(root), NT, "-o", "json")
    assert json.loads(p.stdout)["promoted_dir"] == str(w.active)
    assert f.wait(60) == 0, f.describe()
    assert read_store(w.active) == w.writer.state()


# -- a replica an older statectl kept in the state dir -------------------------------------------------------


@pytest.mark.timeout(300)
def test_status_finds_the_old_standby_root_in_the_state_dir_and_follow_moves_it(world: World, procs):
    w = world
    w.writer.send(random_records(random.Random(195), 220))
    old = make_old_layout_replica(w, old_root_standby_dir(w.state, STORE, TASK).absolute(), settings=True)
    assert old.parents[2] == w.state / ".statectl-standby"
    rows = status_rows(w)
    assert [(r["replica_dir"], r["layout"]) for r in rows] == [(str(old), "old")], rows
    command = rows[0]["move_command"]
    assert command.startswith("statectl standby follow ") and f"--state-dir={w.state}" in command, command
    text = cli(w.tmp, "standby", "status", "--state-dir", str(w.state)).stdout
    assert "old layout" in text and "Samza deletes it" in text and command in text, text

    f = start(w, procs)
    wait_until(lambda: "moved the replica from" in f.stderr(), 60, f"the move note\n{f.describe()}")
    assert not old.exists() and not old.with_name(old.name + ".standby.json").exists()
    tail = w.writer.send(random_records(random.Random(196), 40))
    caught_up(w, f)
    assert f.terminate() == 0, f.describe()
    assert f.result()["records_applied"] == len(tail) and f.result()["reseeds"] == 0  # resumed, not re-seeded
    assert read_store(w.replica) == w.writer.state()
    assert [(r["replica_dir"], r["layout"]) for r in status_rows(w)] == [(str(w.replica), "standby-root")]
    clear_logged_stores(w.state)  # what would have deleted it where it was
    assert read_store(w.replica) == w.writer.state()


@pytest.mark.timeout(300)
def test_promote_finds_a_replica_in_the_old_standby_root(world: World):
    w = world
    w.writer.send(random_records(random.Random(197), 150))
    old = make_old_layout_replica(w, old_root_standby_dir(w.state, STORE, TASK).absolute(), settings=True)
    tail = w.writer.send(random_records(random.Random(198), 20))
    p = cli(w.tmp, "standby", "promote", *w.where(), NT, "-o", "json")
    r = json.loads(p.stdout)
    assert r["promoted_dir"] == str(w.active) and r["caught_up_offset"] == tail[-1], r
    assert "older statectl" in p.stderr and str(old) in p.stderr, p.stderr
    assert read_store(w.active) == w.writer.state()
    assert not old.exists() and not old.with_name(old.name + ".standby.json").exists()


# -- an old-layout replica -----------------------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_status_lists_an_old_layout_replica_and_follow_moves_it_with_its_data_and_offset(world: World, procs):
    w = world
    w.writer.send(random_records(random.Random(183), 250))
    old = make_old_layout_replica(w)
    old_status, old_lock = (old.with_name(old.name + s) for s in (".standby.json", ".standby.lock"))
    assert samza_would_take(old.name, "Partition_0")  # why it must move
    offset = replica_offset(old, w.topic)
    assert offset == w.writer.last_offset

    rows = status_rows(w)
    assert len(rows) == 1 and rows[0]["replica_dir"] == str(old) and rows[0]["layout"] == "old", rows
    command = rows[0]["move_command"]
    assert command.startswith("statectl standby follow ") and "--replica-dir" not in command, command
    assert f"--task '{TASK}'" in command and f"--state-dir {w.state}" in command, command
    text = cli(w.tmp, "standby", "status", "--state-dir", str(w.state)).stdout
    assert str(old) in text and "old layout" in text and command in text, text

    # Its follower (an older statectl) still runs: nothing moves, exit 11, one line.
    fd = os.open(old_lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        p = cli(w.tmp, "standby", "follow", *w.where(), code=11)
        assert "older statectl" in one_error(p.stderr), p.stderr
        assert old.is_dir() and old_status.exists() and not w.replica.exists()
    finally:
        os.close(fd)

    f = start(w, procs)
    wait_until(lambda: "moved the replica from" in f.stderr(), 60, f"the move note\n{f.describe()}")
    assert str(old) in f.stderr() and str(w.replica) in f.stderr()
    assert not old.exists() and not old_status.exists() and not old_lock.exists()
    tail = w.writer.send(random_records(random.Random(184), 60))
    caught_up(w, f)
    assert f.terminate() == 0, f.describe()
    r = f.result()
    assert r["records_applied"] == len(tail) and r["reseeds"] == 0, r  # resumed at the moved offset + 1
    assert f.status_lines()[0]["seeded_from"] is None, f.status_lines()[0]
    assert read_store(w.replica) == w.writer.state()
    assert [(x["replica_dir"], x["layout"], x["move_command"]) for x in status_rows(w)] == [
        (str(w.replica), "standby-root", None)]


@pytest.mark.timeout(300)
def test_promote_finds_an_old_layout_replica(world: World):
    w = world
    w.writer.send(random_records(random.Random(185), 180))
    old = make_old_layout_replica(w)
    tail = w.writer.send(random_records(random.Random(186), 30))
    p = cli(w.tmp, "standby", "promote", *w.where(), NT, "-o", "json")
    r = json.loads(p.stdout)
    assert r["promoted_dir"] == str(w.active) and r["caught_up_offset"] == tail[-1], r
    assert "older statectl" in p.stderr and str(old) in p.stderr, p.stderr
    assert read_store(w.active) == w.writer.state()
    assert not old.exists() and not old.with_name(old.name + ".standby.json").exists()


# -- --layout active-path --------------------------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_active_path_layout_refused_where_the_active_runs_accepted_elsewhere_and_promote_moves_nothing(
        world: World, procs):
    import rocksdict

    w = world
    w.writer.send(random_records(random.Random(187), 300))
    samza_standby_dir(w, 200)  # a Samza standby container filled the active's dir on this host, then stopped
    before = read_store(w.active)
    args = [*w.where(), "--layout", "active-path"]

    # This host runs the active: its store's LOCK is held (here by this test process).
    db = rocksdict.Rdict(str(w.active), rocksdict.Options(raw_mode=True))
    try:
        p = cli(w.tmp, "standby", "follow", *args, code=2)
        line = one_error(p.stderr)
        assert "refusing --layout active-path" in line and "held" in line, p.stderr
    finally:
        db.close()
    # ... or the job's locality places the task's container on this host.
    with CoordinatorStream(w.bootstrap, w.job, "1") as cs:
        cs.create()
        cs.write_task_container(TASK, "0")
        cs.write_container_host("0", socket.gethostname())
    p = cli(w.tmp, "standby", "follow", *args, code=2)
    line = one_error(p.stderr)
    assert "refusing --layout active-path" in line and "locality" in line and socket.gethostname() in line, p.stderr
    p = cli(w.tmp, "standby", "follow", *w.where(), "--layout", "active-path", "--replica-dir",
            str(w.tmp / "r"), code=2)
    assert "exclude each other" in one_error(p.stderr)
    assert read_store(w.active) == before and not w.status_file.exists() and not w.lock_file.exists()

    # Elsewhere: the follower adopts the Samza standby's dir and goes on from its offset.
    with CoordinatorStream(w.bootstrap, w.job, "1") as cs:
        cs.write_container_host("0", "the-active-host.example.com")
    f = start(w, procs, "--layout", "active-path")
    wait_until(lambda: replica_offset(w.active, w.topic) == w.writer.last_offset, 90, f"caught up\n{f.describe()}")
    f.assert_running()
    # Its lock and status files are in the standby root; nothing of it is in the store's dir but the store.
    assert w.lock_file.exists() and w.status_file.exists() and w.state not in w.lock_file.parents
    assert sorted(x.name for x in (w.state / STORE).iterdir()) == ["Partition_0"]
    assert json.loads(w.status_file.read_text())["replica_dir"] == str(w.active)
    rows = status_rows(w)
    assert [(r["replica_dir"], r["layout"], r["following"]) for r in rows] == [(str(w.active), "active-path", True)]
    # A second follower, in either layout, meets the first (the lock and status files are one pair).
    cli(w.tmp, "standby", "follow", *args, code=11)
    p = cli(w.tmp, "standby", "follow", *w.where(), code=2)
    assert str(w.active) in one_error(p.stderr)

    inode = os.stat(w.active).st_ino
    tail = w.writer.send(random_records(random.Random(188), 40))
    p = cli(w.tmp, "standby", "promote", *w.where(), NT, "-o", "json")
    r = json.loads(p.stdout)
    assert f.wait(60) == 0, f.describe()
    assert r["promoted_dir"] == str(w.active) and r["caught_up_offset"] == tail[-1], r
    assert r["replaced_active"] is False and any("nothing moved" in n for n in r["notes"]), r
    assert os.stat(w.active).st_ino == inode  # no move: the same dir
    assert read_store(w.active) == w.writer.state()
    assert offsets_of(w.active) == {w.offset_key(): str(tail[-1])}
    assert not w.status_file.exists() and not w.lock_file.exists()
    # It went on from the Samza standby's offset: the follower and the promote applied the rest, no more.
    assert f.result()["records_applied"] + r["records_applied"] == 140


@pytest.mark.timeout(300)
def test_active_path_layout_refused_with_14_where_a_container_placed_here_clears_the_state_dir(world: World,
                                                                                                procs):
    """The active's store dir is in the state dir: a container of the job whose start reads no checkpoint for any
    of its active tasks clears it whole (ContainerStorageManager.clearLoggedStores), the replica with it. Where
    the job's locality places such a container on this host, --layout active-path is exit 14, nothing written."""
    w = world
    w.writer.send(random_records(random.Random(199), 60))
    here = socket.gethostname()
    config = {f"stores.{STORE}.changelog": f"kafka.{w.topic}",
              "systems.kafka.samza.factory": "org.apache.samza.system.kafka.KafkaSystemFactory",
              "task.checkpoint.factory": "org.apache.samza.checkpoint.kafka.KafkaCheckpointManagerFactory"}
    with CoordinatorStream(w.bootstrap, w.job, "1") as cs:
        cs.create()
        cs.write_config(config)
        cs.write_changelog_partition(TASK, 0)
        cs.write_task_container(TASK, "0")
        cs.write_task_mode(TASK, "Active")
        cs.write_container_host("0", "the-active-host.example.com")
        # The task's standby container, on this host: standby tasks only, so each start clears the state dir.
        cs.write_task_container(f"Standby-{TASK}-0", "0-0")
        cs.write_task_mode(f"Standby-{TASK}-0", "Standby")
        cs.write_container_host("0-0", here)
    args = [*w.where(), "--layout", "active-path"]
    p = cli(w.tmp, "standby", "follow", *args, code=14)
    line = one_error(p.stderr)
    assert "refusing --layout active-path" in line and "standby container 0-0" in line and str(w.active) in line
    assert not w.active.exists() and not w.status_file.exists() and not w.lock_file.exists()

    # Another container with an active task, here, and no checkpoint for it: its next start clears it too.
    with CoordinatorStream(w.bootstrap, w.job, "1") as cs:
        cs.write_container_host("0-0", "the-standby-host.example.com")
        cs.write_task_container("Partition 1", "1")
        cs.write_task_mode("Partition 1", "Active")
        cs.write_container_host("1", here)
    line = one_error(cli(w.tmp, "standby", "follow", *args, code=14).stderr)
    assert "container 1" in line and "checkpoints name none of its active tasks" in line, line
    # ... nor without a checkpoint manager at all (every start of every container clears it).
    with CoordinatorStream(w.bootstrap, w.job, "1") as cs:
        cs.write_config({**config, "task.checkpoint.factory": ""})
    line = one_error(cli(w.tmp, "standby", "follow", *args, code=14).stderr)
    assert "no checkpoint manager" in line, line
    assert not w.active.exists() and not w.status_file.exists()
    # Once container 1's task has a checkpoint the job reads (a v1 one: task.checkpoint.read.versions defaults
    # to 1), its start keeps the state dir: followed.
    with CoordinatorStream(w.bootstrap, w.job, "1") as cs:
        cs.write_config(config)
    write_checkpoint_record(w.bootstrap, w.job, "Partition 1", CheckpointV1({SSP("kafka", "pageviews", 1): "42"}))
    f = start(w, procs, "--layout", "active-path")
    wait_until(lambda: replica_offset(w.active, w.topic) == w.writer.last_offset, 90, f"caught up\n{f.describe()}")
    assert f.terminate() == 0, f.describe()



@pytest.mark.timeout(300)
def test_an_active_path_replicas_files_in_the_old_standby_root_are_moved_by_follow(world: World, procs):
    from statectl.engine.standby.dirs import active_path_replica

    w = world
    w.writer.send(random_records(random.Random(200), 90))
    old = active_path_replica(Replica(w.ref, w.topic, 0, old_root_standby_dir(w.state, STORE, TASK).absolute()),
                              w.state)
    stop = threading.Event()
    done: list[object] = []
    t = threading.Thread(target=lambda: done.append(follow(old, w.bootstrap, stop=stop, state_dir=w.state,
                                                           active_path=True)), daemon=True)
    t.start()
    wait_until(lambda: done or replica_offset(w.active, w.topic) == w.writer.last_offset, 90, "caught up")
    stop.set()
    t.join(60)
    assert old.status_path.parents[2] == w.state / ".statectl-standby" and old.status_path.exists()
    rows = status_rows(w)
    assert [(r["replica_dir"], r["layout"]) for r in rows] == [(str(w.active), "old")], rows

    f = start(w, procs, "--layout", "active-path")
    wait_until(lambda: "moved the lock and status files" in f.stderr(), 60, f.describe())
    assert not old.status_path.exists() and not old.lock_path.exists() and w.status_file.exists()
    tail = w.writer.send(random_records(random.Random(201), 20))
    wait_until(lambda: replica_offset(w.active, w.topic) == tail[-1], 90, f.describe())
    assert [(r["replica_dir"], r["layout"]) for r in status_rows(w)] == [(str(w.active), "active-path")]
    assert f.terminate() == 0, f.describe()
    assert f.result()["records_applied"] == len(tail)  # resumed where it was
