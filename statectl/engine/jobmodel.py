"""Where an operation gets a Samza job's model (formats.jobmodel.JobModel): the one reader standby and adstore
use, over either source that follows formats.jobmodel.JobModelSource.

- A cluster job (ClusterBasedJobCoordinator) keeps its config, task assignments and changelog partition mapping
  on its coordinator stream (kafka.coordinator.CoordinatorStream).
- A standalone job (ZkJobCoordinator) keeps its job model in ZooKeeper (zookeeper.jobmodel.ZooKeeperJobModel);
  its coordinator stream, when it has one (``job.coordinator.system``), holds its config only
  (ZkJobCoordinator.loadMetadataResources writes set-config, never set-changelog). With a ZooKeeper, the model
  is ZooKeeper's and the config the stream's (else the model's own, empty since Samza 1.3).
"""

from __future__ import annotations

import dataclasses

from statectl.formats.jobmodel import JobModel, JobModelSource
from statectl.kafka.client import DEFAULT_TIMEOUT_S, KafkaSecurity
from statectl.kafka.coordinator import CoordinatorStream


def read_job_model(bootstrap: str, job: str, job_id: str, *, zookeeper: str | None = None,
                   security: KafkaSecurity | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                   required: bool = False,
                   stream: tuple[JobModel | None, list[str]] | None = None) -> tuple[JobModel | None, list[str]]:
    """(the job's model, the problems met reading it). Without ``zookeeper``: the coordinator stream's (None
    when the job has no stream; with ``required``, NotFoundError (exit 10) naming the stream). With
    ``zookeeper`` (a connect string): ZooKeeper's model with the stream's config (see the module doc); never
    None. Reads only. Errors as the sources raise them: unreachable brokers or ZooKeeper StatectlError
    (exit 1), no model in ZooKeeper NotFoundError (exit 10), a malformed one StatectlError (exit 1).
    ``stream``: the coordinator stream's answer read already (this function's, without ``zookeeper`` and
    ``required``), for a caller that needed the stream's config first: the stream is not read again."""
    if stream is None:
        with CoordinatorStream(bootstrap, job, job_id, timeout_s=timeout_s, security=security) as cs:
            stream = _read(cs)
            if stream[0] is None and required and not zookeeper:
                raise cs.missing()
    if not zookeeper:
        return stream
    from statectl.zookeeper.jobmodel import ZooKeeperJobModel

    on_stream, problems = stream
    config = on_stream.config if on_stream is not None else {}
    model, _ = _read(ZooKeeperJobModel(zookeeper, job, job_id, config=config, timeout_s=timeout_s))
    assert model is not None  # ZooKeeperJobModel raises instead
    return (dataclasses.replace(model, config=config) if config else model), problems


def _read(source: JobModelSource) -> tuple[JobModel | None, list[str]]:
    model = source.read_job_model()
    return model, (list(source.problems) if model is not None else [])
