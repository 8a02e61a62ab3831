"""doctor runs the adapters' probes side by side: the options it refuses before any probe runs, the order of
the checks, and a probe that breaks its promise never to raise. Each probe has its own tests
(tests/unit/<adapter>/test_probe.py); the real servers are in tests/integration/test_doctor.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from statectl.blobstore.local import LocalBlobStore
from statectl.engine import doctor as doctor_module
from statectl.engine.doctor import CHECK_NAMES, DoctorOptions, doctor, probes
from statectl.errors import AuthError, UsageError
from statectl.probe import Check

NAMES = ("blob store", "kafka", "checkpoint topic", "coordinator topic", "rocksdict", "java", "spark", "state dir")


def opts(tmp_path: Path, url: str | None = None, **kw) -> DoctorOptions:
    return DoctorOptions(blobstore_url=url or f"file://{tmp_path / 'b'}", **kw)


def test_the_check_names_and_their_order_are_stable(tmp_path: Path):
    assert CHECK_NAMES == NAMES
    assert sum((names for names, _ in probes(opts(tmp_path), LocalBlobStore(tmp_path / "b"))), ()) == NAMES


def test_a_run_without_kafka_or_state_dir(tmp_path: Path):
    r = doctor(opts(tmp_path), LocalBlobStore(tmp_path / "b"))
    assert [c.name for c in r.checks] == list(NAMES)
    by_name = {c.name: c for c in r.checks}
    assert by_name["blob store"].status == "ok" and by_name["rocksdict"].status == "ok"
    assert [by_name[n].detail for n in ("kafka", "checkpoint topic", "coordinator topic", "state dir")] == \
        ["no --kafka given"] * 3 + ["no --state-dir given"]
    assert r.ok is (not r.failed)


def test_a_probe_that_raises_fails_its_own_checks_only(tmp_path: Path, monkeypatch):
    def broken_kafka(*a, **kw):
        raise AuthError("kafka: boom\nsecond line", hint="check it")

    monkeypatch.setattr(doctor_module.kafka_probe, "probe", broken_kafka)
    r = doctor(opts(tmp_path, kafka="127.0.0.1:9"), LocalBlobStore(tmp_path / "b"))
    assert [c.name for c in r.checks] == list(NAMES)
    assert [c.name for c in r.failed] == ["kafka", "checkpoint topic", "coordinator topic"]
    assert r.failed[0] == Check("kafka", "fail", "the probe failed: unexpected AuthError: kafka: boom", "check it")
    assert not r.ok
    assert {c.name: c for c in r.checks}["blob store"].status == "ok"


def test_a_usage_error_opening_the_store_is_raised_not_reported(tmp_path: Path):
    def bad_url():
        raise UsageError("invalid blob store URL")

    with pytest.raises(UsageError):
        doctor(opts(tmp_path), bad_url)


@pytest.mark.parametrize("kw, message", [
    ({"timeout_s": 0}, "--timeout"),
    ({"kafka": " , "}, "no Kafka brokers"),
    ({"job": "a/b"}, "checkpoint topic"),
    ({"job_id": ""}, "--job-id"),
    ({"probe_ttl_seconds": 59}, "probe TTL"),
])
def test_bad_options_are_usage_errors_before_any_check(tmp_path: Path, kw, message):
    with pytest.raises(UsageError, match=message):
        doctor(opts(tmp_path, **kw), lambda: pytest.fail("no check may run"))


def test_the_probes_run_side_by_side(tmp_path: Path, monkeypatch):
    """The blob store and Kafka probes are in their waits at once (each waits for the other at a barrier): an
    endpoint that does not answer costs its own timeout, not the sum; the checks keep their order."""
    import threading

    both = threading.Barrier(2, timeout=30)

    def waits(names: tuple[str, ...]):
        def probe(*a, **kw) -> list[Check]:
            both.wait()  # run one after the other: the first one times out at the barrier, a failed check
            return [Check(name, "ok", "answered") for name in names]
        return probe

    monkeypatch.setattr(doctor_module.blobstore_probe, "probe", waits(doctor_module.blobstore_probe.NAMES))
    monkeypatch.setattr(doctor_module.kafka_probe, "probe", waits(doctor_module.kafka_probe.NAMES))
    r = doctor(opts(tmp_path, kafka="127.0.0.1:9"), LocalBlobStore(tmp_path / "b"))
    assert [c.name for c in r.checks] == list(NAMES)
    assert all(c.status == "ok" for c in r.checks[:4]), r.checks[:4]
