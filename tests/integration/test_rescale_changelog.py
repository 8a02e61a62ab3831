"""The changelog marker a rescale commits for a target task names the task's changelog partition as the
target job's next start assigns it (its set-changelog mapping; a new task gets the next partition, in
TaskName order: Samza's JobModelCalculator), not the task's place in the target list."""

from __future__ import annotations

import uuid

from statectl.blobstore import open_blobstore
from statectl.catalog.kafka_log import KafkaCheckpointLog, KafkaCheckpointLogs
from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.refs import StoreRef, new_checkpoint_id
from statectl.engine.rescale.commit import changelog_markers
from statectl.formats.checkpoint import (
    KAFKA_CHANGELOG_FACTORY,
    SSP,
    KafkaChangelogMarker,
    decode_changelog_marker,
    encode_changelog_marker,
)
from statectl.kafka.coordinator import CoordinatorStream

STORE = "counts"


def test_the_marker_names_the_tasks_mapped_changelog_partition(tansu, tmp_path):
    job = f"rc-{uuid.uuid4().hex[:8]}"
    # The job's coordinator mapped its 12 tasks as Samza's first start does (lexicographic order).
    tasks = [f"Partition {k}" for k in range(12)]
    mapping = {t: i for i, t in enumerate(sorted(tasks))}
    with CoordinatorStream(tansu.bootstrap, job, "1") as cs:
        cs.create()
        cs.write_config({"job.name": job, "job.id": "1", f"stores.{STORE}.changelog": f"{job}-changelog"})
        for task, partition in mapping.items():
            cs.write_changelog_partition(task, partition)
    old = KafkaChangelogMarker(SSP("kafka", f"{job}-changelog", 0), "4267")
    with KafkaCheckpointLog(tansu.bootstrap, job, "1") as log:
        for task in ("Partition 2", "Partition 10", "Partition 13"):
            log.commit(StoreRef(job, "1", task, STORE), new_checkpoint_id(), "blobs/00/x",
                       markers={KAFKA_CHANGELOG_FACTORY: {STORE: encode_changelog_marker(old)}})
    refs = [StoreRef(job, "1", f"Partition {k}", STORE) for k in range(14)]
    store = open_blobstore(f"file://{tmp_path / 'blobs'}")
    try:
        logs = KafkaCheckpointLogs(tansu.bootstrap)
        markers = changelog_markers(BlobCheckpointStore(store, logs), refs)
        logs.close()
    finally:
        store.close()
    got = {ref.task: decode_changelog_marker(m[KAFKA_CHANGELOG_FACTORY][STORE]) for ref, m in zip(refs, markers)
           if m is not None}
    assert set(got) == {"Partition 2", "Partition 10", "Partition 13"}
    assert all(m.offset is None and m.ssp.stream == old.ssp.stream for m in got.values())
    # mapped tasks keep the job's partition; Partition 12 and 13 are new: 12 and 13 in TaskName order
    assert got["Partition 2"].ssp.partition == 4 and got["Partition 10"].ssp.partition == 2
    assert got["Partition 13"].ssp.partition == 13
