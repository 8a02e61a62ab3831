"""standby promote and failover against what the world and operators do to them: a changelog deleted and
recreated while the replica's follower was stopped, a follower configured by its environment (a systemd
unit) started again by a failed promote run from an operator's shell, a status file someone else wrote,
a job whose restore mode cannot be read, dry runs, and two promotes (or failovers) of one replica at once.
Real OS processes on a real Kafka-protocol broker (Tansu)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from statectl.engine.standby.replica import standby_dir
from tests.integration.test_hostile_standby import docs_dir, one_error, recreate_topic
from tests.integration.test_standby import (  # noqa: F401 - world and procs are fixtures
    STORE,
    TASK,
    World,
    caught_up,
    procs,
    sigterm_pending,
    start,
    status_rows,
    world,
)
from tests.integration.test_standby_containers import (  # noqa: F401 - job and followers are fixtures
    CONTAINER0,
    STORES,
    Job,
    assert_locality_messages,
    assert_promoted,
    follow_container,
    followers,
    job,
    records,
    write_job,
)
from tests.integration.test_standby_restore_mode import checkpoint, job_config
from tests.tools.genstore import fingerprint, make_store
from tests.tools.standby_helpers import (
    STATECTL,
    ChangelogWriter,
    Follower,
    alive,
    clean_env,
    cli,
    cli_here,
    offsets_of,
    process_state,
    random_records,
    read_store,
    wait_until,
)

NON_TRANSACTIONAL = {"task.transactional.state.restore.enabled": "false"}


def new_writer(w: World) -> None:
    w.writer.close()
    w.writer = ChangelogWriter(w.bootstrap, w.topic)


def status(w: World) -> dict:
    return json.loads(w.status_file.read_text())


def lock_pid(lock: Path) -> int | None:
    try:
        return int(lock.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def promote_proc(w: World, *extra: str, env: dict[str, str] | None = None, cwd: Path | None = None
                 ) -> subprocess.Popen:
    return subprocess.Popen([STATECTL, "standby", "promote", *w.where(), *extra], env=env or clean_env(w.tmp),
                            cwd=cwd or w.tmp, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def timed_out_promote(w: World, f: Follower, *, env: dict[str, str] | None = None,
                      before_promote=None) -> tuple[str, int]:
    """A promote that fences the running follower ``f`` and times out (a tail of 40 000 records to apply in
    0.001 s); return its stderr and the changelog's last offset. ``before_promote()`` runs while ``f`` is
    held stopped. The job's config says non-transactional restore."""
    job_config(w, NON_TRANSACTIONAL)
    wait_until(lambda: w.status_file.exists() and status(w)["pid"] == f.pid, 30, "the follower's status file")
    os.kill(f.pid, signal.SIGSTOP)  # held: the tail below is still to be applied when promote fences it
    bulk = ChangelogWriter(w.bootstrap, w.topic, linger_ms=50)
    try:
        bulk.send([(b"bulk-%06d" % (i % 3000), b"v%d" % i) for i in range(40_000)])
    finally:
        bulk.close()
    last = max(o for o, _, _ in bulk.log)
    if before_promote is not None:
        before_promote()
    proc = promote_proc(w, "--timeout", "0.001s", env=env)
    try:
        wait_until(lambda: sigterm_pending(f.pid) or proc.poll() is not None, 60, "promote fences the follower")
    finally:
        os.kill(f.pid, signal.SIGCONT)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 1 and "timed out" in err, err
    assert f.wait(60) == 0, f.describe()
    return err, last


def restarted_follower(w: World, old_pid: int, procs) -> int:
    """The pid of the follower a failed promote started again, once it holds the replica's lock."""

    def back() -> int | None:
        pid = lock_pid(w.lock_file)
        try:
            st = status(w)
        except (OSError, ValueError):
            return None
        return pid if pid not in (None, old_pid) and st["pid"] == pid and alive(pid) else None

    pid = wait_until(back, 60, f"the follower of {w.replica} is started again")
    procs[1].append(pid)
    return pid


# -- the changelog deleted and recreated while the replica's follower was stopped ----------------------------


@pytest.mark.timeout(300)
def test_promote_refuses_a_replica_of_a_changelog_since_recreated(world: World, procs):
    """3 000 keys of the old topic, then a longer new topic: the replica's offset is inside the new log, so
    only the topic id its follower recorded tells. Refused (exit 1), dry run too, nothing changed; a
    follower then re-seeds it, and promote gives exactly the new topic."""
    w = world
    job_config(w, NON_TRANSACTIONAL)
    w.writer.send([(b"old-%05d" % i, b"old") for i in range(3000)])
    f = start(w, procs)
    caught_up(w, f)
    wait_until(lambda: status(w).get("topic_id"), 30, "the status names the topic id")
    assert f.terminate() == 0, f.describe()
    recreate_topic(w.bootstrap, w.topic)
    new_writer(w)
    w.writer.send([(b"new-%05d" % i, b"new") for i in range(4500)])
    replica_before, status_before = fingerprint(w.replica), w.status_file.read_text()

    for dry in (["--dry-run"], []):
        p = cli(w.tmp, "standby", "promote", *w.where(), *dry, code=1)
        line = one_error(p.stderr)
        assert "deleted and recreated" in line and w.topic in line, p.stderr
        assert "standby follow" in p.stderr, p.stderr  # the hint: a follower re-seeds it
        assert not w.active.exists()
        assert fingerprint(w.replica) == replica_before and w.status_file.read_text() == status_before

    f = start(w, procs)
    caught_up(w, f)
    r = json.loads(cli(w.tmp, "standby", "promote", *w.where(), "-o", "json").stdout)
    assert f.wait(60) == 0, f.describe()
    assert r["caught_up_offset"] == w.writer.last_offset
    assert read_store(w.active) == w.writer.state()
    assert offsets_of(w.active) == {w.offset_key(): str(w.writer.last_offset)}


def recreate_partitions(bootstrap: str, topic: str, partitions: int) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_topics([topic])
        wait_until(lambda: topic not in admin.list_topics(), 30, f"{topic} is deleted")
        admin.create_topics([NewTopic(topic, partitions, 1)])
        wait_until(lambda: topic in admin.list_topics(), 30, f"{topic} is created again")
    finally:
        admin.close()


@pytest.mark.timeout(400)
def test_failover_refuses_replicas_of_a_changelog_since_recreated(job: Job, followers):
    j = job
    write_job(j)
    f = follow_container(j, followers)
    status_files = sorted((j.state / ".statectl-standby").rglob("*.standby.json"))
    wait_until(lambda: all(json.loads(p.read_text()).get("topic_id") for p in status_files), 30, "topic ids")
    assert f.terminate() == 0, f.describe()
    recreate_partitions(j.bootstrap, j.topics["counts"], 12)
    for p in range(12):  # a longer log on every partition: the replicas' offsets are inside it
        j.writers[("counts", p)].close()
        w = j.writers[("counts", p)] = ChangelogWriter(j.bootstrap, j.topics["counts"], p)
        w.send(records(700 + p, 60))
    before = {t: fingerprint(standby_dir(j.state, "counts", t)) for t in CONTAINER0}
    end = j.end()
    for dry in (["--dry-run"], []):
        p = cli(j.tmp, "standby", "failover", "--container", "0", *j.flags(), *dry, code=1)
        line = one_error(p.stderr)
        assert "deleted and recreated" in line and j.topics["counts"] in line, p.stderr
        assert j.end() == end  # no locality message
        assert {t: fingerprint(standby_dir(j.state, "counts", t)) for t in CONTAINER0} == before
        assert not any((j.state / s / t.replace(" ", "_")).exists() for s in STORES for t in CONTAINER0)
    # The follower re-seeds the recreated changelog's replicas; then the container fails over whole.
    follow_container(j, followers)
    cli(j.tmp, "standby", "failover", "--container", "0", *j.flags())
    assert_promoted(j)


# -- the follower a failed promote started again -------------------------------------------------------------


def env_configured_follower(w: World, procs, extra_env: dict[str, str] | None = None) -> Follower:
    """A follower configured as a systemd unit's Environment= does: every setting from STATECTL_*."""
    env = {"STATECTL_KAFKA": w.bootstrap, "STATECTL_JOB": w.job, "STATECTL_TASK": TASK, "STATECTL_STORE": STORE,
           "STATECTL_STATE_DIR": str(w.state), **(extra_env or {})}
    f = Follower(w.tmp, ["--changelog", w.topic, "--partition", "0"], env=env)
    procs[0].append(f)
    caught_up(w, f)
    return f


@pytest.mark.timeout(300)
@pytest.mark.parametrize("operator_env", ["clean", "other-state-dir"])
def test_a_failed_promote_starts_an_env_configured_follower_again_as_it_was(world: World, procs, operator_env):
    """The follower's settings came from its environment, the promote's from an operator's shell (none, or
    another job's state dir in STATECTL_STATE_DIR): the follower comes back with its own settings, on its own
    replica, and the promote says so. The secret in the follower's environment is not in its status file;
    the restarted follower has the promote's (secrets reach it from the promote's environment)."""
    w = world
    w.writer.send(random_records(random.Random(301), 100))
    f = env_configured_follower(w, procs, {"STATECTL_S3_SECRET_ACCESS_KEY": "follower-secret-0123"})
    recorded = w.status_file.read_text()
    elsewhere = w.tmp / "ops-state"
    env = clean_env(w.tmp)
    if operator_env == "other-state-dir":
        elsewhere.mkdir()
        env.update(STATECTL_STATE_DIR=str(elsewhere), STATECTL_KAFKA=w.bootstrap, STATECTL_JOB="ops-job")
    env["STATECTL_S3_SECRET_ACCESS_KEY"] = "promote-secret-4567"
    err, last = timed_out_promote(w, f, env=env)
    pid = restarted_follower(w, f.pid, procs)
    assert f"started again (pid {pid})" in one_error(err), err
    assert status(w)["replica_dir"] == str(w.replica)
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    assert b"STATECTL_S3_SECRET_ACCESS_KEY=promote-secret-4567" in environ
    assert not any(e.startswith(b"STATECTL_STATE_DIR=") for e in environ)  # the promote's settings stay its own
    if elsewhere.exists():
        assert not list(elsewhere.rglob("*")), list(elsewhere.rglob("*"))  # no replica bootstrapped there
    caught_up(w, upto=last, timeout=120)
    wait_until(lambda: status_rows(w)[0]["following"] and status_rows(w)[0]["follower_pid"] == pid, 60, "following")
    assert "follower-secret-0123" not in recorded
    assert "argv" not in json.loads(recorded) and json.loads(recorded)["follower"]["state_dir"] == str(w.state)


@pytest.mark.timeout(300)
def test_a_follower_that_cannot_come_back_is_reported_with_the_command_to_run(world: World, procs):
    """The follower's config file is gone by the time a failed promote starts it again: the restarted
    follower exits, and the promote's error says so and names the command that starts it."""
    w = world
    w.writer.send(random_records(random.Random(302), 100))
    cfg = w.tmp / "follower.toml"
    cfg.write_text(f'[default]\nkafka = "{w.bootstrap}"\njob = "{w.job}"\nstore = "{STORE}"\n'
                   f'state_dir = "{w.state}"\n')
    f = env_configured_follower(w, procs, {"STATECTL_CONFIG": str(cfg)})
    recorded = status(w)
    err, _ = timed_out_promote(w, f, before_promote=cfg.unlink)
    line = one_error(err)
    assert "did not come back" in line and "config file" in line, err
    assert "statectl standby follow" in line and f"--state-dir={w.state}" in line and f"--job={w.job}" in line, err
    wait_until(lambda: not _locked_by_other(w, f.pid), 30, "no follower holds the replica")
    assert recorded["follower"]["config_file"] == str(cfg)


def _locked_by_other(w: World, old_pid: int) -> bool:
    pid = lock_pid(w.lock_file)
    return pid is not None and pid != old_pid and alive(pid)


@pytest.mark.timeout(300)
def test_a_failed_promote_runs_no_command_line_from_the_status_file(world: World, procs):
    """Whoever can write the status file does not choose what runs: an argv (the old format) in it is
    ignored; the follower comes back from its recorded settings."""
    w = world
    w.writer.send(random_records(random.Random(303), 100))
    f = start(w, procs)
    caught_up(w, f)
    marker = w.tmp / "ran-from-the-status-file"

    def tamper() -> None:
        st = status(w)
        st["argv"] = [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]
        st["cwd"] = str(w.tmp)
        w.status_file.write_text(json.dumps(st))

    err, last = timed_out_promote(w, f, before_promote=tamper)
    pid = restarted_follower(w, f.pid, procs)
    assert f"started again (pid {pid})" in err, err
    assert Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1:5] == [b"-m", b"statectl", b"standby",
                                                                            b"follow"]
    caught_up(w, upto=last, timeout=120)
    assert not marker.exists()


# -- a restore mode promote cannot read -----------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_without_the_jobs_config_promote_is_refused_with_14_unless_told(world: World, procs):
    """No coordinator stream: the job's start may delete the promoted dir (its default, transactional
    restore does), so promote refuses (exit 14, nothing changed, its dry run too) unless the operator says
    the job restores the store non-transactionally."""
    w = world
    w.writer.send(random_records(random.Random(304), 80))
    f = start(w, procs)
    caught_up(w, f)
    for dry in (["--dry-run"], []):
        p = cli(w.tmp, "standby", "promote", *w.where(), *dry, code=14)
        line = one_error(p.stderr)
        assert "coordinator stream" in line and "--non-transactional-restore" in p.stderr, p.stderr
        f.assert_running()
        assert not w.active.exists()
    p = cli(w.tmp, "standby", "promote", *w.where(), "--non-transactional-restore", "-o", "json")
    assert f.wait(60) == 0, f.describe()
    assert json.loads(p.stdout)["restore_mode"] == "unchecked"
    assert read_store(w.active) == w.writer.state()


# -- dry runs exit as the command would -----------------------------------------------------------------------


def hold_lock_as(lock: Path, pid: int, host: str) -> int:
    """Hold ``lock`` (flock) in this process, its holder written as ``pid`` on ``host``; return the fd."""
    import fcntl

    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{pid} {host}".encode(), 0)
    return fd


@pytest.mark.timeout(400)
def test_every_refusal_of_promote_exits_the_same_with_dry_run(world: World, procs):
    import rocksdict

    w = world
    w.writer.send(random_records(random.Random(305), 200))
    f = start(w, procs)
    caught_up(w, f)

    def both(*args: str, code: int) -> None:
        # The dry run in this process, the command itself as an operator runs it (a lock held by another
        # process is judged by processes on both sides).
        for dry, run in ((["--dry-run"], cli if code == 11 else cli_here), ([], cli)):
            p = run(w.tmp, "standby", "promote", *w.where(), *args, *dry, code=None)
            assert p.returncode == code, (args, dry, p.returncode, p.stderr)
            assert len(one_error(p.stderr)) > 0
        f.assert_running()  # never fenced
        assert not w.active.exists() or w.active == held

    held = None
    nt = "--non-transactional-restore"
    both(code=14)  # no coordinator stream: the restore mode is unknown
    both(nt, "--timeout", "soon", code=2)
    both(nt, "--active-dir", str(docs_dir(w.tmp / "docs")), code=2)
    both(nt, "--replica", "3", code=10)  # no such replica
    held = w.active
    make_store(held, 50, 16, sst_mb=1)
    db = rocksdict.Rdict(str(held), rocksdict.Options(raw_mode=True))  # a running active holds its store
    try:
        both(nt, code=11)
    finally:
        db.close()
    # A follower this host cannot stop (it runs on another host, as its lock file says).
    assert f.terminate() == 0, f.describe()
    fd = hold_lock_as(w.lock_file, 4242, "another-host")
    try:
        for dry in (["--dry-run"], []):
            p = cli(w.tmp, "standby", "promote", *w.where(), nt, *dry, code=11)
            assert "another-host" in one_error(p.stderr), p.stderr
    finally:
        os.close(fd)
    # Transactional restore (the job's config now on its coordinator stream), the replica past the checkpoint.
    job_config(w)
    checkpoint(w, 50)
    for dry, run in ((["--dry-run"], cli_here), ([], cli)):
        run(w.tmp, "standby", "promote", *w.where(), *dry, code=14)
        run(w.tmp, "standby", "promote", *w.where(), nt, *dry, code=2)  # the config says otherwise


@pytest.mark.timeout(400)
def test_every_refusal_of_failover_exits_the_same_with_dry_run(job: Job, followers):
    from rocksdict import Rdict

    from statectl.formats.checkpoint import BLOB_STORE_FACTORY

    j = job
    write_job(j)
    end = j.end()

    def both(container: str, code: int, *extra: str) -> str:
        out = []
        for dry, run in ((["--dry-run"], cli if code == 11 else cli_here), ([], cli)):  # as promote's above
            p = run(j.tmp, "standby", "failover", "--container", container, *j.flags(), *extra, *dry, code=None)
            assert p.returncode == code, (container, dry, p.returncode, p.stderr)
            out.append(one_error(p.stderr))
            assert j.end() == end  # nothing written to the coordinator stream
        return out[0]

    assert "host-c" in both("1", 2)  # its standby container is on host-c, not here
    both("0", 10)  # no replica here yet
    both("0", 2, "--timeout", "soon")
    f = follow_container(j, followers)
    held = j.state / "sums" / "Partition_10"
    held.parent.mkdir(parents=True, exist_ok=True)
    db = Rdict(str(held))  # a running active task of the container holds its store
    try:
        both("0", 11)
    finally:
        db.close()
    f.assert_running()
    assert f.terminate() == 0, f.describe()
    lock = standby_dir(j.state, "sums", "Partition 5")
    fd = hold_lock_as(lock.with_name(lock.name + ".standby.lock"), 4242, "another-host")
    try:
        assert "another-host" in both("0", 11)  # a follower this host cannot stop
    finally:
        os.close(fd)
    write_job(j, config={"stores.dims.factory": "org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory",
                         "stores.dims.restore.factories": BLOB_STORE_FACTORY})
    end = j.end()
    both("0", 14)  # a store restored from the blob store, with no pre-restore here


# -- two promotes (or failovers) of one replica at once -------------------------------------------------------


@contextmanager
def held_mid_apply(proc: subprocess.Popen) -> Iterator[None]:
    """Wait until ``proc`` (run with ``standby-apply=1*stop``) is stopped at its first batch of a tail, run the
    block while it is held there, then let it go on (SIGCONT; it is killed if the block fails)."""
    wait_until(lambda: proc.poll() is not None or process_state(proc.pid) == "T", 60,
               "the first command stops in its apply")
    assert proc.poll() is None, f"the first command ended before the second ran: {proc.communicate()}"
    ok = False
    try:
        yield
        ok = True
    finally:
        if not ok:
            proc.kill()
        os.kill(proc.pid, signal.SIGCONT)


@pytest.mark.timeout(300)
def test_two_promotes_of_one_replica_one_wins_and_the_other_exits_11(world: World, procs):
    w = world
    job_config(w, NON_TRANSACTIONAL)
    w.writer.send(random_records(random.Random(306), 300))
    f = start(w, procs)
    caught_up(w, f)
    assert f.terminate() == 0, f.describe()
    w.writer.send(random_records(random.Random(307), 300))  # a tail: the first promote is still applying it
    # The first promote stops itself at its first batch of the tail: the second one meets it mid-way.
    first = promote_proc(w, "--timeout", "300s", env=dict(clean_env(w.tmp), STATECTL_FAILPOINTS="standby-apply=1*stop"))
    with held_mid_apply(first):
        assert lock_pid(w.lock_file) == first.pid
        second = [cli(w.tmp, "standby", "promote", *w.where(), *dry, code=None) for dry in (["--dry-run"], [])]
    out, err = first.communicate(timeout=280)
    assert first.returncode == 0, err
    for p in second:
        assert p.returncode == 11, (p.returncode, p.stderr)
        assert f"pid {first.pid}" in one_error(p.stderr), p.stderr
    assert read_store(w.active) == w.writer.state()
    assert not w.replica.exists() and not w.status_file.exists()
    assert status_rows(w) == []  # no follower started, no replica bootstrapped again


@pytest.mark.timeout(400)
def test_two_failovers_of_one_container_one_wins_and_the_other_exits_11(job: Job, followers):
    j = job
    write_job(j)
    f = follow_container(j, followers)
    assert f.terminate() == 0, f.describe()
    for s in STORES:  # a tail for every store: the first failover is still applying it
        for task in CONTAINER0:
            j.writer(s, task).send(records(800, 40, start=900))
    start_offset = j.end()
    locks = [standby_dir(j.state, s, t) for s in STORES for t in CONTAINER0]
    first = subprocess.Popen([STATECTL, "standby", "failover", "--container", "0", *j.flags(), "--timeout", "300s"],
                             cwd=j.tmp,
                             env=dict(clean_env(j.tmp), STATECTL_FAILPOINTS="standby-apply=1*stop"),
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with held_mid_apply(first):
        assert any(lock_pid(p.with_name(p.name + ".standby.lock")) == first.pid for p in locks)
        second = [cli(j.tmp, "standby", "failover", "--container", "0", *j.flags(), *dry, code=None)
                  for dry in (["--dry-run"], [])]
    _, err = first.communicate(timeout=280)
    assert first.returncode == 0, err
    for p in second:
        assert p.returncode == 11, (p.returncode, p.stderr)
        assert f"pid {first.pid}" in one_error(p.stderr), p.stderr
    assert_locality_messages(j, start_offset)
    assert_promoted(j)
    assert not list((j.state / ".statectl-standby").rglob("*.standby.json"))  # nothing followed again
