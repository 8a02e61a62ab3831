"""The job model of a standalone Samza job (ZkJobCoordinator), read from ZooKeeper as Samza publishes it.

Under the connect string's chroot (ZkJobCoordinatorFactory.getJobCoordinationZkPath, ZkKeyBuilder)::

    /app-<app name>-<app id>/<job name>-<job id>-<protocol>-coordinationData     the job's root
        jobModelGeneration/activeJobModelVersion   the version the processors agreed on (Samza 1.7 and later)
        jobModelGeneration/jobModelVersion         the latest version published (perhaps still being agreed on)
        jobModelGeneration/jobModels/<version>     the model

ApplicationConfig.getGlobalAppId: the app name is ``app.name``, else ``job.name``; the app id ``app.id``, else
``job.id``, else "1" (the job's config, from its coordinator stream when it has one, else --job and --job-id).
Protocol 2.0 (Samza 1.3 and later) publishes the model through ZkMetadataStore: segments ``<version>/0``,
``/1``, .. with a CRC32 after the JSON (formats.jobmodel.join_segments); protocol 1.0 (ZkUtils.publishJobModel)
wrote the JSON itself as the data of ``<version>``. The model read is the active version, else the latest.
"""

from __future__ import annotations

from collections.abc import Mapping

from statectl.errors import NotFoundError, StatectlError
from statectl.formats.jobmodel import JobModel, JobModelFormatError, decode_job_model, join_segments
from statectl.zookeeper.client import CONNECT_HINT, DEFAULT_TIMEOUT_S, ZooKeeper

PROTOCOLS = ("2.0", "1.0")  # ZkJobCoordinatorFactory.PROTOCOL_VERSION: "2.0" since Samza 1.3
VERSION_NODES = ("activeJobModelVersion", "jobModelVersion")


def coordination_roots(job: str, job_id: str, config: Mapping[str, str] | None = None) -> list[str]:
    """The job's root znode under each coordination protocol, newest first (see the module doc)."""
    config = config or {}
    name = config.get("job.name", job)
    jid = config.get("job.id", job_id)
    app_name, app_id = config.get("app.name", name), config.get("app.id", jid)
    return [f"/app-{app_name}-{app_id}/{name}-{jid}-{p}-coordinationData" for p in PROTOCOLS]


class ZooKeeperJobModel:
    """The formats.jobmodel.JobModelSource of a standalone job: ``read_job_model()`` reads the model from the
    ZooKeeper of ``connect`` (the chroot included). ``config``: the job's config when known (its app name and
    id place the model). It never answers None: no model of the job there is NotFoundError (exit 10);
    a model Samza could not read either (a version that is not a number, a checksum that does not match,
    JSON that is not a JobModel) StatectlError (exit 1); ZooKeeper unreachable within ``timeout_s``,
    StatectlError (exit 1). Reads only."""

    def __init__(self, connect: str, job: str, job_id: str, *, config: Mapping[str, str] | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S):
        self.connect, self.job, self.job_id, self.timeout_s = connect, job, job_id, timeout_s
        self.roots = coordination_roots(job, job_id, config)

    @property
    def problems(self) -> list[str]:
        return []  # the model is read whole or refused, never in part

    def read_job_model(self) -> JobModel:
        with ZooKeeper(self.connect, timeout_s=self.timeout_s) as zk:
            for root in self.roots:
                if zk.children(root) is not None:
                    return self._read(zk, root)
            raise NotFoundError(f"ZooKeeper {zk.connect} holds no job model of job {self.job}-{self.job_id}: no "
                                f"znode {self.roots[0]}", hint=_others(zk) or "check --job and --job-id (the "
                                "job's app.name and app.id place it too), and the chroot; " + CONNECT_HINT)

    def _read(self, zk: ZooKeeper, root: str) -> JobModel:
        generation = f"{root}/jobModelGeneration"
        for node in VERSION_NODES:
            raw = zk.get(f"{generation}/{node}")
            if raw:
                break
        else:
            raise NotFoundError(f"job {self.job}-{self.job_id} has published no job model in ZooKeeper {zk.connect} "
                                f"(no {generation}/{VERSION_NODES[-1]})",
                                hint="its processors publish one when they first start")
        version = raw.decode("utf-8", "replace").strip()
        path = f"{generation}/jobModels/{version}"
        if not version.isascii() or not version.isdigit():
            raise self._malformed(zk, f"{generation}/{node}", f"it holds {version[:40]!r}, not a version number")
        segments = zk.children(path)
        if segments is None:
            raise NotFoundError(f"{generation}/{node} in ZooKeeper {zk.connect} names job model version {version}, "
                                f"but there is no {path}", hint="the job is publishing a new version: try again")
        try:
            data = self._segments(zk, path, segments) if "0" in segments else (zk.get(path) or b"")
            if not data:
                raise JobModelFormatError("it holds no data and no segment 0")
            where = f"job model version {version} of job {self.job}-{self.job_id} in ZooKeeper ({path})"
            return decode_job_model(data, where=where)
        except JobModelFormatError as e:
            raise self._malformed(zk, path, str(e)) from None

    @staticmethod
    def _segments(zk: ZooKeeper, path: str, children: list[str]) -> bytes:
        """The value ZkMetadataStore.get reads: segments 0, 1, .. up to the first missing one, joined."""
        parts = []
        while str(len(parts)) in children:
            segment = zk.get(f"{path}/{len(parts)}")
            if segment is None:
                break
            parts.append(segment)
        return join_segments(parts)

    def _malformed(self, zk: ZooKeeper, path: str, why: str) -> StatectlError:
        return StatectlError(f"the job model of job {self.job}-{self.job_id} in ZooKeeper {zk.connect} is "
                             f"malformed: {path}: {why}",
                             hint="Samza cannot read it either; the job publishes a new one when its processors "
                                  "change, or pass --partition (and --changelog)")


def _others(zk: ZooKeeper, limit: int = 5) -> str:
    """A hint naming the job roots the ensemble holds (at most ``limit``), or "" when it holds none."""
    found = []
    for app in sorted(c for c in zk.children("/") or [] if c.startswith("app-"))[:50]:
        found += [f"/{app}/{c}" for c in sorted(zk.children(f"/{app}") or []) if c.endswith("-coordinationData")]
        if len(found) >= limit:
            break
    return ("the jobs it holds: " + ", ".join(found[:limit])) if found else ""
