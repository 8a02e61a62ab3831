"""statectl.metrics: standby's Prometheus metrics, parsed back with prometheus_client's own parser; textfiles
replaced atomically (readers on other threads never see a partial file), failover counters kept in the file
across runs and across processes counting at once; the metrics port served and refused when taken."""

from __future__ import annotations

import multiprocessing
import os
import socket
import threading
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from statectl import metrics
from statectl.errors import DiscardedError, NotFoundError, UsageError

LABELS = metrics.replica_labels("page-views", "1", "Partition 0", "counts", "cl", 3, "/state/x")


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``text``: (name, sorted labels) -> value."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def values(text: str, name: str) -> list[float]:
    return [v for (n, _), v in samples(text).items() if n == name]


def status(**kw):
    base = dict(applied_offset=None, end_offset=None, lag_records=None, lag_s=None, updated=0.0, records_applied=0,
                reseeds=0)
    return SimpleNamespace(**{**base, **kw})


def test_follower_metrics_follow_its_status_and_leave_out_what_is_not_known():
    m = metrics.FollowerMetrics(LABELS)
    text = metrics.render(m.collect()).decode()
    assert values(text, metrics.FOLLOWER_UP) == [1.0]
    assert values(text, metrics.APPLIED_OFFSET) == [] and values(text, metrics.LAG_RECORDS) == []

    seen = []
    m.feeding(seen.append)(status(applied_offset=41, end_offset=50, lag_records=8, lag_s=1.5, updated=1700000000.25,
                                  records_applied=42, reseeds=1))
    assert len(seen) == 1
    got = samples(metrics.render(m.collect()).decode())
    labels = tuple(sorted(zip(metrics.REPLICA_LABELS, LABELS)))
    assert dict(labels)["samza_job"] == "page-views" and dict(labels)["partition"] == "3"
    assert got == {
        (metrics.FOLLOWER_UP, labels): 1.0, (metrics.APPLIED_OFFSET, labels): 41.0,
        (metrics.END_OFFSET, labels): 50.0, (metrics.LAG_RECORDS, labels): 8.0, (metrics.LAG_SECONDS, labels): 1.5,
        (metrics.UPDATED, labels): 1700000000.25, (metrics.RECORDS_APPLIED + "_total", labels): 42.0,
        (metrics.RESEEDS + "_total", labels): 1.0}

    m.update(status(applied_offset=41, records_applied=42))  # the brokers stopped answering: lag not known
    text = metrics.render(m.collect()).decode()
    assert values(text, metrics.LAG_RECORDS) == [] and values(text, metrics.APPLIED_OFFSET) == [41.0]
    m.stopped()
    assert values(metrics.render(m.collect()).decode(), metrics.FOLLOWER_UP) == [0.0]


def test_label_values_with_quotes_newlines_and_backslashes_round_trip():
    odd = metrics.replica_labels('j"ob', "1", "Partition 0", "st\\ore", "c\nl", 0, "/a b/\"c\"")
    m = metrics.FollowerMetrics(odd)
    got = samples(metrics.render(m.collect()).decode())
    labels = tuple(sorted(zip(metrics.REPLICA_LABELS, odd)))
    assert got == {(metrics.FOLLOWER_UP, labels): 1.0, (metrics.RECORDS_APPLIED + "_total", labels): 0.0,
                   (metrics.RESEEDS + "_total", labels): 0.0}


def test_status_and_check_families():
    row = SimpleNamespace(job=None, job_id=None, task=None, store=None, changelog="cl", partition=0,
                          replica_dir="/r", following=False, applied_offset=7, end_offset=8, lag_records=0,
                          lag_s=0.0, updated="2024-01-02T03:04:05Z", promotable=True)
    text = metrics.render(metrics.status_families([row])).decode()
    got = samples(text)
    labels = tuple(sorted(zip(metrics.REPLICA_LABELS, ("", "", "", "", "cl", "0", "/r"))))
    assert got[(metrics.FOLLOWER_UP, labels)] == 0.0 and got[(metrics.PROMOTABLE, labels)] == 1.0
    assert got[(metrics.UPDATED, labels)] == 1704164645.0
    assert metrics.RECORDS_APPLIED + "_total" not in {n for n, _ in got}  # the follower's, not status's

    v = SimpleNamespace(task="Partition 0", standby="Standby-Partition 0-0", host="h")
    result = SimpleNamespace(tasks=2, standbys=2, violations=[v], unmapped=[object(), object()])
    got = samples(metrics.render(metrics.check_families("j", "1", result, now=5.0)).decode())
    job = (("samza_job", "j"), ("samza_job_id", "1"))
    assert got == {
        (metrics.VIOLATIONS, job): 1.0,
        (metrics.VIOLATION, tuple(sorted(job + (("task", "Partition 0"), ("standby", "Standby-Partition 0-0"),
                                                ("host", "h"))))): 1.0,
        (metrics.TASKS, tuple(sorted(job + (("role", "active"),)))): 2.0,
        (metrics.TASKS, tuple(sorted(job + (("role", "standby"),)))): 2.0,
        (metrics.UNMAPPED, job): 2.0,
        (metrics.CHECKED, job): 5.0}
    none = SimpleNamespace(tasks=1, standbys=0, violations=[], unmapped=[])
    text = metrics.render(metrics.check_families("j", "1", none)).decode()
    assert values(text, metrics.VIOLATIONS) == [0.0] and values(text, metrics.VIOLATION) == []
    assert values(text, metrics.UNMAPPED) == [0.0]


def failovers(path: Path) -> dict[tuple[str, ...], float]:
    return {tuple(s.labels[n] for n in metrics.FAILOVER_LABELS): s.value
            for fam in text_string_to_metric_families(path.read_text()) for s in fam.samples
            if s.name == metrics.FAILOVERS + "_total"}


def test_failover_counters_are_kept_in_the_file_across_runs(tmp_path: Path):
    path = tmp_path / "standby.prom"
    for result in ("promoted", "promoted", "failed", "refused"):
        assert metrics.record_failover(path, "j", "1", "Partition 0", "counts", result) is None
    assert metrics.record_failover(path, "j", "1", "Partition 1", "counts", "promoted") is None
    assert failovers(path) == {("j", "1", "Partition 0", "counts", "promoted"): 2.0,
                               ("j", "1", "Partition 0", "counts", "failed"): 1.0,
                               ("j", "1", "Partition 0", "counts", "refused"): 1.0,
                               ("j", "1", "Partition 1", "counts", "promoted"): 1.0}
    assert sorted(p.name for p in tmp_path.iterdir()) == [".standby.prom.lock", "standby.prom"]
    with pytest.raises(ValueError):
        metrics.record_failover(path, "j", "1", "Partition 0", "counts", "maybe")


def test_a_file_that_is_not_prometheus_text_restarts_the_counters_with_a_note(tmp_path: Path):
    path = tmp_path / "standby.prom"
    path.write_text("statectl_standby_failovers_total{oops 3\n")
    note = metrics.record_failover(path, "j", "1", "t", "s", "promoted")
    assert note and "start again from 0" in note
    assert failovers(path) == {("j", "1", "t", "s", "promoted"): 1.0}
    path.write_bytes(b"\xff\xfe")
    assert "start again from 0" in metrics.record_failover(path, "j", "1", "t", "s", "promoted")


def test_result_of_a_promote():
    assert metrics.result_of(None) == "promoted"
    assert metrics.result_of(DiscardedError("no")) == "refused"
    assert metrics.result_of(NotFoundError("no")) == "failed"
    assert metrics.result_of(KeyboardInterrupt()) == "failed"


def _count(path: str, n: int, start: multiprocessing.synchronize.Event) -> None:
    start.wait()
    for _ in range(n):
        metrics.record_failover(Path(path), "j", "1", "t", "s", "promoted")


@pytest.mark.timeout(120)
def test_promotes_counting_at_once_in_processes_each_count(tmp_path: Path):
    path = tmp_path / "standby.prom"
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_count, args=(str(path), 25, start)) for _ in range(4)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(100)
        assert p.exitcode == 0
    assert failovers(path) == {("j", "1", "t", "s", "promoted"): 100.0}


@pytest.mark.timeout(120)
def test_a_reader_never_sees_a_partial_textfile(tmp_path: Path):
    """Big files (many series) rewritten over and over while another thread reads and parses: every read
    is one whole file, old or new."""
    path = tmp_path / "status.prom"
    rows = [SimpleNamespace(job="j", job_id="1", task=f"Partition {i}", store="counts", changelog="cl", partition=i,
                            replica_dir=f"/state/{'x' * 200}/{i}", following=True, applied_offset=i, end_offset=i,
                            lag_records=0, lag_s=0.0, updated=None, promotable=True) for i in range(300)]
    metrics.write_textfile(path, metrics.status_families(rows))
    done = threading.Event()
    seen: list[int] = []
    errors: list[BaseException] = []

    def read() -> None:
        while not done.is_set():
            try:
                text = path.read_text()
                up = values(text, metrics.FOLLOWER_UP)
                assert len(up) == 300 and text.endswith("\n"), len(up)
                seen.append(int(values(text, metrics.APPLIED_OFFSET)[0]))
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)
                return

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for round_ in range(1, 60):
            for r in rows:
                r.applied_offset = round_ * 1000 + int(r.task.split()[1])
            metrics.write_textfile(path, metrics.status_families(rows))
    finally:
        done.set()
        reader.join(60)
    assert not errors, errors[0]
    assert seen and len(set(seen)) > 1  # it read while the file was being replaced
    assert [p.name for p in tmp_path.iterdir()] == ["status.prom"]  # no temporary file left
    assert (path.stat().st_mode & 0o777) == 0o644 & ~_umask()


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old


def test_a_textfile_that_cannot_be_written_stays_as_it_was(tmp_path: Path):
    path = tmp_path / "status.prom"
    path.write_text("# old\n")
    with pytest.raises(Exception):  # noqa: B017 - whatever render raises: the file must stay
        metrics.write_textfile(path, [object()])
    assert path.read_text() == "# old\n" and [p.name for p in tmp_path.iterdir()] == ["status.prom"]


def test_check_textfile(tmp_path: Path):
    assert metrics.check_textfile(tmp_path / "a.prom") == (tmp_path / "a.prom")
    with pytest.raises(UsageError, match="no such directory"):
        metrics.check_textfile(tmp_path / "nope" / "a.prom")
    with pytest.raises(UsageError, match="is a directory"):
        metrics.check_textfile(tmp_path)


def test_serve_scrapes_and_a_taken_port_is_a_usage_error():
    m = metrics.FollowerMetrics(LABELS)
    server = metrics.serve(m, 0, "127.0.0.1")
    try:
        host, port = server.address
        assert host == "127.0.0.1" and port > 0
        text = urllib.request.urlopen(server.url, timeout=10).read().decode()
        assert values(text, metrics.FOLLOWER_UP) == [1.0]
        assert "process_cpu_seconds_total" not in text and "python_info" not in text  # its own registry
        with pytest.raises(UsageError) as e:
            metrics.serve(m, port, "127.0.0.1")
        assert str(e.value) == f"cannot serve metrics on 127.0.0.1:{port}: Address already in use"
    finally:
        server.close()
        server.close()  # idempotent
    with socket.create_server(("127.0.0.1", port)):  # the port is free again
        pass
    with pytest.raises(UsageError, match="0 to 65535"):
        metrics.serve(m, 70000, "127.0.0.1")
