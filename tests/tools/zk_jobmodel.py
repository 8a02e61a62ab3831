"""A standalone Samza job's model written into a real ZooKeeper as Samza writes it (the tests' side, written
from Samza's source, not from statectl's reader):

- the JSON: JobModelUtil.writeJobModel's SamzaObjectMapper ``writeValueAsString`` (compact; creator properties
  first: config, containers, then max-change-log-stream-partitions; a TaskModel's task-name,
  system-stream-partitions, changelog-partition, task-mode; each SSP a HashMap of system, partition, stream,
  keyBucket; the HashMaps in java.util.HashMap order);
- protocol 2.0 (ZkJobCoordinatorFactory, Samza 1.3+): ZkMetadataStore.put under the job's root: the JSON with
  its CRC32 appended as a big-endian long, split into znodes ``.../jobModels/<version>/<i>`` of 1020 * 1020
  bytes; protocol 1.0: ZkUtils.publishJobModel's pretty-printed JSON as the data of ``.../jobModels/<version>``;
- the versions (ZkUtils.publishJobModelVersion, publishActiveJobModelVersion): decimal strings.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from statectl.formats.checkpoint import SSP
from statectl.formats.jackson import java_hashmap_order

SEGMENT = 1020 * 1020  # ZkMetadataStore.VALUE_SEGMENT_SIZE_IN_BYTES


@dataclass
class Task:
    changelog_partition: int
    ssps: list[SSP] = field(default_factory=list)
    mode: str = "Active"


def model_json(containers: Mapping[str, Mapping[str, Task]], *, config: Mapping[str, str] | None = None,
               pretty: bool = False) -> bytes:
    """The JobModel's JSON (UTF-8) with ``containers``: processor id -> task name -> Task."""
    def task(name: str, t: Task) -> dict:
        return {"task-name": name, "system-stream-partitions": [s.to_json() for s in t.ssps],
                "changelog-partition": t.changelog_partition, "task-mode": t.mode}

    obj = {
        "config": dict(config or {}),
        "containers": {pid: {"processor-id": pid,
                             "tasks": {n: task(n, containers[pid][n]) for n in java_hashmap_order(containers[pid])}}
                       for pid in java_hashmap_order(containers)},
        "max-change-log-stream-partitions": 1 + max((t.changelog_partition for ts in containers.values()
                                                     for t in ts.values()), default=-1),
    }
    if pretty:  # Jackson's DefaultPrettyPrinter: " : " between a name and its value
        return json.dumps(obj, indent=2, separators=(",", " : "), ensure_ascii=False).encode()
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def segments(value: bytes) -> list[bytes]:
    """ZkMetadataStore.chunkMetadataStoreValue: the value and its CRC32 (8 bytes, big-endian), in SEGMENT pieces."""
    data = value + zlib.crc32(value).to_bytes(8, "big")
    return [data[i:i + SEGMENT] for i in range(0, len(data), SEGMENT)]


def job_root(job: str, job_id: str = "1", *, protocol: str = "2.0", app: str | None = None,
             app_id: str | None = None) -> str:
    """ZkJobCoordinatorFactory.getJobCoordinationZkPath:
    ``/app-<app name>-<app id>/<job>-<id>-<protocol>-coordinationData``."""
    return f"/app-{app or job}-{app_id or job_id}/{job}-{job_id}-{protocol}-coordinationData"


def publish(client, chroot: str, root: str, version: int, data: bytes, *, protocol: str = "2.0",
            active: bool = True, segmented: Iterable[bytes] | None = None) -> None:
    """Publish ``data`` (a model's JSON) as job model ``version`` under ``chroot + root`` with the kazoo
    ``client`` (no chroot of its own), and make it the latest version (and the active one with ``active``).
    ``segmented``: the znodes to write instead of segments(data) (protocol 2.0)."""
    generation = f"{chroot}{root}/jobModelGeneration"
    path = f"{generation}/jobModels/{version}"
    if protocol == "1.0":
        client.create(path, data, makepath=True)
    else:
        client.ensure_path(path)
        for i, segment in enumerate(segments(data) if segmented is None else segmented):
            client.create(f"{path}/{i}", segment)
    set_version(client, f"{generation}/jobModelVersion", version)
    if active:
        set_version(client, f"{generation}/activeJobModelVersion", version)


def set_version(client, path: str, version: int | str) -> None:
    client.ensure_path(path)
    client.set(path, str(version).encode())
