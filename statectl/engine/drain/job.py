"""The clients one drain command holds on a job: its coordinator stream, its checkpoint topic, and
consumers on the brokers of each system its streams live on; and the job's current run id."""

from __future__ import annotations

from typing import Any

from statectl.catalog.kafka_log import KafkaCheckpointLog
from statectl.engine.drain.model import DrainTarget
from statectl.errors import NotFoundError
from statectl.kafka.client import open_consumer
from statectl.kafka.coordinator import CoordinatorStream
from statectl.kafka.systems import system_brokers


class DrainJob:
    """The clients one drain command holds: the coordinator stream, the checkpoint topic, a consumer."""

    def __init__(self, target: DrainTarget):
        target.validate()
        self.target = target
        self.coordinator = CoordinatorStream(target.bootstrap, target.job, target.job_id,
                                             timeout_s=target.timeout_s, security=target.security)
        self.checkpoints = KafkaCheckpointLog(target.bootstrap, target.job, target.job_id,
                                              timeout_s=target.timeout_s, security=target.security)
        self._consumer = None
        self._elsewhere: dict[str, Any] = {}  # other clusters' brokers -> a consumer there

    def consumer(self):
        """A consumer on the target's brokers, opened at first use."""
        if self._consumer is None:
            self._consumer = open_consumer(self.target.bootstrap, timeout_s=self.target.timeout_s,
                                           security=self.target.security)
        return self._consumer

    def consumer_of(self, system: str, config: dict[str, str]) -> tuple[Any, str]:
        """A consumer on the brokers of the job's ``system`` (kafka.systems.system_brokers), and those brokers."""
        where = system_brokers(config, system, self.target.bootstrap, self.target.security)
        if not where.elsewhere:
            return self.consumer(), self.target.bootstrap
        if where.bootstrap not in self._elsewhere:
            self._elsewhere[where.bootstrap] = open_consumer(where.bootstrap, timeout_s=self.target.timeout_s,
                                                             security=where.security)
        return self._elsewhere[where.bootstrap], where.bootstrap

    def run_id(self, *, required: bool) -> str | None:
        """The run acted on: the target's ``run_id``, else the job's ``app.run.id``; None when there is
        neither, unless ``required`` (then NotFoundError, exit 10)."""
        run_id = self.target.run_id or self.coordinator.run_id()
        if run_id is None and required:
            raise NotFoundError(f"job {self.target.job}-{self.target.job_id} has no run id (app.run.id) in its "
                                f"coordinator stream {self.coordinator.topic}",
                                hint="pass --run-id, the run id the job was deployed with")
        return run_id

    def close(self) -> None:
        closers = [self.coordinator.close, self.checkpoints.close,
                   lambda: self._consumer.close() if self._consumer is not None else None]
        for closer in closers + [c.close for c in self._elsewhere.values()]:
            try:
                closer()
            except Exception:  # noqa: BLE001 - closing is best effort; the result stands
                pass

    def __enter__(self) -> DrainJob:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
