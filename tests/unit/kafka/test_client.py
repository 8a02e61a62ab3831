"""kafka-python clients without a broker: a missing package, unreachable brokers, bad bootstrap lists."""

from __future__ import annotations

import socket
import sys

import pytest

from statectl.catalog.kafka_log import KafkaCheckpointLog
from statectl.errors import MissingDependencyError, StatectlError, UsageError
from statectl.kafka.client import kafka_module, open_consumer


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_missing_kafka_python_is_a_missing_dependency(monkeypatch):
    monkeypatch.setitem(sys.modules, "kafka", None)  # import kafka -> ImportError
    with pytest.raises(MissingDependencyError) as e:
        kafka_module()
    assert e.value.exit_code == 13 and "kafka-python" in str(e.value) and "pip install" in e.value.hint
    with pytest.raises(MissingDependencyError):
        open_consumer("127.0.0.1:9092")


@pytest.mark.timeout(30)  # a hang bound: how quickly it gives up is for make bench, not a unit test
def test_unreachable_brokers_are_named_quickly():
    bootstrap = f"127.0.0.1:{_closed_port()}"
    with pytest.raises(StatectlError) as e:
        open_consumer(bootstrap, timeout_s=1.0)
    assert e.value.exit_code == 1 and bootstrap in str(e.value) and "--kafka" in e.value.hint


def test_checkpoint_log_unreachable(monkeypatch):
    from statectl.catalog.refs import StoreRef

    bootstrap = f"127.0.0.1:{_closed_port()}"
    log = KafkaCheckpointLog(bootstrap, "job", "1", timeout_s=1.0)
    with pytest.raises(StatectlError, match="cannot reach Kafka brokers 127.0.0.1"):
        log.latest(StoreRef("job", "1", "Partition 0", "s"))
    log.close()


def test_empty_bootstrap_is_a_usage_error():
    with pytest.raises(UsageError):
        open_consumer(" , ")
