"""standby's Prometheus metrics on a real Kafka-protocol broker (Tansu): a follower as a
real process serving --metrics-port, scraped over HTTP and parsed with prometheus_client's parser, its values
those `standby status -o json` reports; the --metrics-file of status, promote and check parsed back, the
failover counter carried across promotes by the file, the file replaced by a rename (never written in
place); a metrics port already in use refused with one line and exit 2."""

from __future__ import annotations

import json
import random
import re
import socket
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from statectl.kafka.coordinator import CoordinatorStream
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
from tests.tools.standby_helpers import Follower, cli, random_records, wait_until

PREFIX = "statectl_standby_"


def parse(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Sample name -> [(labels, value)]."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def one(got: dict, name: str) -> tuple[dict[str, str], float]:
    assert len(got.get(PREFIX + name, [])) == 1, (name, got.get(PREFIX + name))
    return got[PREFIX + name][0]


def metrics_url(f: Follower) -> str:
    def found() -> str | None:
        f.assert_running()
        m = re.search(r"note: serving metrics on (http://\S+)", f.stderr())
        return m.group(1) if m else None

    return wait_until(found, 60, "the follower serves its metrics")


def scrape(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        return parse(r.read().decode())


def replica_labels(w: World) -> dict[str, str]:
    return {"samza_job": w.job, "samza_job_id": "1", "task": TASK, "store": STORE, "changelog": w.topic,
            "partition": "0", "replica_dir": str(w.replica)}


@pytest.mark.timeout(300)
def test_a_followers_metrics_port_says_what_status_says(world: World, procs):
    w = world
    w.writer.send(random_records(random.Random(31), 300))
    f = start(w, procs, "--metrics-port", "0", "--metrics-addr", "127.0.0.1")
    url = metrics_url(f)
    caught_up(w, f)
    last = w.writer.last_offset

    def settled() -> tuple[dict, dict] | None:
        got = scrape(url)
        rows = status_rows(w)
        if PREFIX + "lag_records" not in got or len(rows) != 1 or rows[0]["lag_records"] != 0:
            return None
        if one(got, "lag_records")[1] != 0 or one(got, "applied_offset")[1] != last:
            return None
        return got, rows[0]

    got, row = wait_until(settled, 90, "the follower reports it is caught up")
    labels = replica_labels(w)
    for name in ("follower_up", "applied_offset", "end_offset", "lag_records", "lag_seconds",
                 "records_applied_total", "reseeds_total", "status_updated_timestamp_seconds"):
        assert one(got, name)[0] == labels, name
    assert one(got, "follower_up")[1] == 1
    assert one(got, "applied_offset")[1] == row["applied_offset"] == last
    assert one(got, "end_offset")[1] == row["end_offset"] == last + 1
    assert one(got, "lag_records")[1] == row["lag_records"] == 0
    assert one(got, "lag_seconds")[1] == row["lag_s"] == 0.0
    assert one(got, "records_applied_total")[1] == 300  # bootstrapped from the changelog: every record
    assert one(got, "reseeds_total")[1] == 0
    assert (row["job"], row["job_id"], row["task"], row["store"]) == (w.job, "1", TASK, STORE)
    assert not any(name.startswith(("process_", "python_")) for name in got)  # its own registry

    # More records: the port follows them.
    w.writer.send(random_records(random.Random(32), 50))
    caught_up(w, f)
    wait_until(lambda: one(scrape(url), "applied_offset")[1] == w.writer.last_offset, 60, "the port follows")
    assert one(scrape(url), "records_applied_total")[1] == 350

    # status --metrics-file: the same replica, seen from its status file.
    prom = w.tmp / "status.prom"
    cli(w.tmp, "standby", "status", "--state-dir", str(w.state), "--metrics-file", str(prom))
    row = status_rows(w)[0]
    got = parse(prom.read_text())
    assert one(got, "follower_up") == (labels, 1.0) and one(got, "promotable") == (labels, 1.0)
    assert one(got, "applied_offset")[1] == row["applied_offset"]
    assert one(got, "lag_records")[1] == row["lag_records"]
    assert PREFIX + "records_applied_total" not in got

    assert f.terminate() == 0, f.describe()
    cli(w.tmp, "standby", "status", "--state-dir", str(w.state), "--metrics-file", str(prom))
    got = parse(prom.read_text())
    assert one(got, "follower_up") == (labels, 0.0) and one(got, "promotable") == (labels, 1.0)
    with pytest.raises(OSError):  # the follower's port is closed with it
        scrape(url)


@pytest.mark.timeout(120)
def test_a_metrics_port_in_use_exits_2_with_one_line(world: World):
    w = world
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        p = cli(w.tmp, "standby", "follow", *w.where(), "--metrics-port", str(port), "--metrics-addr", "127.0.0.1",
                code=2)
    assert error_lines(p.stderr) == [f"Error: cannot serve metrics on 127.0.0.1:{port}: Address already in use"]
    assert [line for line in p.stderr.splitlines() if not line.startswith(("Error:", "Hint:", "note:"))] == [], \
        p.stderr
    assert "Traceback" not in p.stderr and p.stdout == ""
    assert not w.replica.exists() and not w.status_file.exists()  # nothing was made


def failovers(path: Path, w: World) -> dict[str, float]:
    """result -> count of the world's task and store (no other series in the file)."""
    rows = parse(path.read_text())[PREFIX + "failovers_total"]
    assert {(lb["samza_job"], lb["samza_job_id"], lb["task"], lb["store"]) for lb, _ in rows} == {(w.job, "1", TASK,
                                                                                                   STORE)}
    return {lb["result"]: value for lb, value in rows}


def follow_then_kill(w: World, procs, seed: int) -> None:
    w.writer.send(random_records(random.Random(seed), 100))
    f = start(w, procs)
    caught_up(w, f)
    wait_until(lambda: w.status_file.exists() and json.loads(w.status_file.read_text())["pid"] == f.pid, 30,
               "the follower's status file")
    f.kill()


@pytest.mark.timeout(400)
def test_promote_counts_failovers_in_its_metrics_file(world: World, procs):
    w = world
    prom = w.tmp / "textfile" / "standby.prom"
    prom.parent.mkdir()
    promote = ["standby", "promote", *w.where(), "--metrics-file", str(prom)]
    unchecked = [*promote, NT]  # no coordinator stream yet: the operator says how the job restores

    follow_then_kill(w, procs, 41)
    cli(w.tmp, *unchecked)
    got = parse(prom.read_text())
    labels, value = one(got, "failovers_total")
    assert labels == {"samza_job": w.job, "samza_job_id": "1", "task": TASK, "store": STORE, "result": "promoted"}
    assert value == 1
    assert one(got, "last_failover_timestamp_seconds")[0] == labels
    inode = prom.stat().st_ino

    follow_then_kill(w, procs, 42)  # a new replica: the first one is the active store now
    cli(w.tmp, *unchecked)
    assert failovers(prom, w) == {"promoted": 2.0}  # read back from the file, then incremented
    assert prom.stat().st_ino != inode  # replaced by a rename, never rewritten in place
    assert sorted(p.name for p in prom.parent.iterdir()) == [".standby.prom.lock", "standby.prom"]

    cli(w.tmp, *unchecked, code=10)  # no replica left: a failover that could not use a standby
    assert failovers(prom, w) == {"promoted": 2.0, "failed": 1.0}

    # Transactional restore (the default) and no checkpoint: the job's start would delete it, refused.
    with CoordinatorStream(w.bootstrap, w.job, "1") as cs:
        cs.create()
        cs.write_config({f"stores.{STORE}.changelog": f"kafka.{w.topic}",
                         "systems.kafka.samza.factory": "org.apache.samza.system.kafka.KafkaSystemFactory"})
        cs.write_changelog_partition(TASK, 0)
    follow_then_kill(w, procs, 43)
    cli(w.tmp, *promote, code=14)
    assert failovers(prom, w) == {"promoted": 2.0, "failed": 1.0, "refused": 1.0}

    # A metrics file in a dir that does not exist: refused before the promote does anything.
    p = cli(w.tmp, "standby", "promote", *w.where(), "--metrics-file", str(w.tmp / "nope" / "x.prom"), code=2)
    assert "no such directory" in p.stderr and w.replica.exists()


@pytest.mark.timeout(120)
def test_check_writes_its_placement_violations(tansu, tmp_path: Path):
    job = f"standby-check-metrics-{random.randrange(10**9)}"
    prom = tmp_path / "check.prom"
    args = ["standby", "check", "--kafka", tansu.bootstrap, "--job", job, "--metrics-file", str(prom)]
    cli(tmp_path, *args, code=10)
    assert not prom.exists()  # no coordinator stream: nothing checked, nothing written
    with CoordinatorStream(tansu.bootstrap, job, "1") as cs:
        cs.create()
        cs.write_task_container(TASK, "0")
        cs.write_task_mode(TASK, "Active")
        cs.write_task_container("Standby-Partition 0-0", "0-0")
        cs.write_task_mode("Standby-Partition 0-0", "Standby")
        cs.write_container_host("0", "host-a.example.com")
        cs.write_container_host("0-0", "host-a.example.com")
    cli(tmp_path, *args, code=1)
    got = parse(prom.read_text())
    job_labels = {"samza_job": job, "samza_job_id": "1"}
    assert one(got, "placement_violations") == (job_labels, 1.0)
    assert one(got, "placement_violation") == (
        {**job_labels, "task": TASK, "standby": "Standby-Partition 0-0", "host": "host-a.example.com"}, 1.0)
    assert sorted((labels["role"], v) for labels, v in got[PREFIX + "tasks"]) == [("active", 1.0), ("standby", 1.0)]

    with CoordinatorStream(tansu.bootstrap, job, "1") as cs:
        cs.write_container_host("0-0", "host-b.example.com")
    cli(tmp_path, *args)
    got = parse(prom.read_text())
    assert one(got, "placement_violations") == (job_labels, 0.0)
    assert PREFIX + "placement_violation" not in got
