"""The commit of a rescale's targets, shared by a new rescale and one run again
(statectl.engine.rescale.rerun): the targets' leases, the changelog markers their checkpoints carry, the
record of the rescale, the commits in order and backup's post-commit cleanup of each."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from statectl import failpoints
from statectl.blobstore.base import BlobStore
from statectl.catalog.commit import finish_commit, prepare_commit
from statectl.catalog.lease import GC_WAIT_SECONDS, Lease
from statectl.catalog.records import BlobCheckpointStore, CheckpointRecord
from statectl.catalog.refs import StoreRef
from statectl.engine.rescale.options import RescaleOptions
from statectl.engine.rescale.result import RescaleResult
from statectl.errors import PartialError, StatectlError
from statectl.progress import ProgressReporter

WHAT = "rescale"


def take_leases(stack: ExitStack, opts: RescaleOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
                refs: list[StoreRef], progress: ProgressReporter) -> list[Lease]:
    """Take the lease of every target store (held until ``stack`` closes), finishing the cleanup an
    interrupted commit of it left pending, as backup does; every target's at once (each is a few requests of
    its own). The first error in target order is raised once all were tried, the leases taken released."""

    def take(ref: StoreRef) -> Lease:
        lease = Lease(blobstore, ref, operation=WHAT, wait_for_gc=GC_WAIT_SECONDS)
        lease.__enter__()
        try:
            prepare_commit(blobstore, checkpoints, ref, grace_seconds=opts.grace_seconds, progress=progress)
        except BaseException:
            lease.__exit__(None, None, None)
            raise
        return lease

    if not refs:
        return []
    with ThreadPoolExecutor(min(len(refs), 8), thread_name_prefix="statectl-lease") as pool:
        futures = [pool.submit(take, ref) for ref in refs]
    leases, error = [], None
    for f in futures:
        try:
            lease = f.result()
        except BaseException as e:  # noqa: BLE001 - raised below, once the leases taken are in the stack
            error = error or e
            continue
        stack.push(lease.__exit__)
        leases.append(lease)
    if error is not None:
        raise error
    for lease in leases:
        if lease.notice:
            progress.note(lease.notice)
    return leases


@dataclass
class PendingTarget:
    """A target snapshot uploaded and checked, to commit: its record, index and the blob ids whose TTLs go."""

    ref: StoreRef
    record: CheckpointRecord
    index: Any
    blob_ids: list[str]


def commit_targets(opts: RescaleOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
                   leases: list[Lease], pending: list[PendingTarget], markers: list[Any], recorder: Any,
                   result: RescaleResult, progress: ProgressReporter, committed_before: int = 0) -> None:
    """Holding every target's lease: record the rescale, commit the targets in order, mark the record done,
    then run the post-commit cleanups. PartialError (exit 3) when a commit fails after another target of the
    rescale was committed (``committed_before``: by an earlier run)."""
    failpoints.hit("rescale-before-commit")
    t0 = time.monotonic()
    if leases:  # fencing: never commit after a backup took a target over (every lease renewed at once)
        with ThreadPoolExecutor(min(len(leases), 8), thread_name_prefix="statectl-fence") as pool:
            list(pool.map(lambda lease: lease.check(), leases))
    recorder.committing(checkpoints, [p.ref for p in pending], result)
    done: list[str] = []
    total = committed_before + len(pending)
    for p, extra in zip(pending, markers):
        try:
            failpoints.hit("rescale-commit")
            checkpoints.commit(p.ref, p.record, markers=extra)
        except StatectlError as e:
            if not done and not committed_before:
                raise
            raise PartialError(
                f"rescale committed {committed_before + len(done)} of {total} targets"
                + (f" ({', '.join(done)})" if done else "") + f", then the commit of {p.ref.task} failed: {e}",
                hint="the rescale is recorded: run the same command again; it commits the remaining targets from "
                     "their uploads (no Spark job)") from e
        done.append(p.ref.task)
    result.committed = True
    recorder.done(progress)
    # each target's cleanup under its own lease, several at once (each is idempotent: the next backup or gc
    # of a target finishes one cut short); the first error in target order is raised once all ran
    at_once = max(1, min(len(pending), opts.parallelism, 8))  # each cleans up 8 blobs at a time
    with ThreadPoolExecutor(at_once, thread_name_prefix="statectl-cleanup") as pool:
        futures = [pool.submit(finish_commit, blobstore, checkpoints, p.ref, p.record, p.index,
                               new_blob_ids=p.blob_ids, grace_seconds=opts.grace_seconds, progress=progress,
                               what=WHAT) for p in pending]
    for f in futures:
        f.result()
    result.phases["commit_s"] = round(time.monotonic() - t0, 3)


def changelog_markers(checkpoints: BlobCheckpointStore, refs: list[StoreRef]) -> list[dict[str, dict[str, str]] | None]:
    """Per target, the markers its commit adds besides the blob-store one. With a Kafka checkpoint topic:
    when the target task's latest checkpoint names a changelog position for the store (the old
    partitioning's), a marker for the same changelog stream, the task's changelog partition (the job's
    set-changelog mapping, as its next start assigns it: _changelog_partitions), with no offset, so that the
    job does not replay the old partition's changelog from there onto the new state.
    None otherwise (the commit leaves the task's other markers and input offsets as they are). Read once,
    before anything is uploaded."""
    log = checkpoints.commit_log
    if log is None or not refs:
        return [None] * len(refs)
    from statectl.errors import SnapshotNotFoundError
    from statectl.formats.checkpoint import (
        KAFKA_CHANGELOG_FACTORY,
        SSP,
        CheckpointFormatError,
        KafkaChangelogMarker,
        decode_changelog_marker,
        encode_changelog_marker,
    )

    job_log = log.for_job(refs[0].job, refs[0].job_id) if hasattr(log, "for_job") else log
    try:
        latest, _problems = job_log.latest_checkpoints()
    except SnapshotNotFoundError:
        return [None] * len(refs)  # no checkpoint topic yet: the first commit creates it
    out: list[dict[str, dict[str, str]] | None] = []
    partitions: dict[str, int] | None = None
    for ref in refs:
        base = latest.get(ref.task)
        old = (base.state_checkpoint_markers if base else {}).get(KAFKA_CHANGELOG_FACTORY, {}).get(ref.store)
        if old is None:
            out.append(None)
            continue
        try:
            ssp = decode_changelog_marker(old).ssp
        except CheckpointFormatError as e:
            raise StatectlError(f"the latest checkpoint of {ref} has a changelog marker statectl cannot read: {e}",
                                hint="nothing was uploaded or committed") from None
        if partitions is None:
            partitions = _changelog_partitions(job_log, refs)
        marker = KafkaChangelogMarker(SSP(ssp.system, ssp.stream, partitions[ref.task], ssp.key_bucket), None)
        out.append({KAFKA_CHANGELOG_FACTORY: {ref.store: encode_changelog_marker(marker)}})
    return out


def _changelog_partitions(job_log: Any, refs: list[StoreRef]) -> dict[str, int]:
    """Each target task's changelog partition: the target job's set-changelog mapping on its coordinator
    stream, a task it does not map getting the partition the job's next start gives it
    (formats.jobmodel.changelog_partitions_of)."""
    from statectl.engine.jobmodel import read_job_model
    from statectl.formats.jobmodel import changelog_partitions_of

    model, _ = read_job_model(job_log.bootstrap, refs[0].job, refs[0].job_id, security=job_log.security,
                              timeout_s=job_log.timeout_s)
    return changelog_partitions_of([ref.task for ref in refs], model.changelog_partitions if model else {})
