"""A rescale run again. The record of the latest rescale into the target store (statectl.catalog.rescales),
written before its first commit, decides what the same command does the next time:

- no record, or the record of another rescale that is done: a new rescale (statectl.engine.rescale);
- the record of this rescale (the same jobs, store, task names, partitioners or key groups):
  - done (every target committed): nothing to do, nothing written, exit 0;
  - its commit was cut: the targets it did not commit are committed from the snapshots it uploaded, and
    nothing else (no Spark job, no upload);
  - refused (exit 1) when a source's latest snapshot (or the one --snapshots names) is no longer the one it
    read (within one job: nor the one it made of that task), or a target of a cut one moved on since;
- the record of another rescale whose commit was cut: refused; running that one again finishes it.

``--again`` sets the record aside: a new rescale, with every check a new one gets (statectl.engine.rescale.layout).
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from statectl.blobstore.base import BlobStore
from statectl.catalog.records import BlobCheckpointStore, CheckpointRecord, iso_utc, now_ms
from statectl.catalog.refs import StoreRef
from statectl.catalog.rescales import (
    COMMITTING,
    DONE,
    MalformedRescaleRecord,
    RecordedSnapshot,
    RescaleRecord,
    read_rescale,
    rescale_key,
    write_rescale,
)
from statectl.engine.rescale.options import RescaleOptions
from statectl.engine.rescale.result import RescaleResult, SourceInfo, TargetInfo
from statectl.engine.rescale.commit import PendingTarget, changelog_markers, commit_targets, take_leases
from statectl.engine.rescale.layout import latest_id
from statectl.errors import BlobNotFoundError, PreconditionFailedError, StatectlError
from statectl.progress import ProgressReporter


class RecordedRescaleError(StatectlError):
    """What the blob store records of a rescale into the target store forbids running this one (exit 1);
    nothing was written."""


def identity(opts: RescaleOptions) -> dict[str, Any]:
    """What makes two runs the same rescale (``opts`` with its key-group partitioner set)."""
    return {"job": opts.job, "job_id": opts.job_id, "to_job": opts.to_job or opts.job, "store": opts.store,
            "sources": opts.source_tasks, "targets": opts.target_tasks, "partitioner": opts.partitioner or "murmur2",
            "from_partitioner": opts.source_partitioner or "murmur2"}


@dataclass
class Recorded:
    """What check_recorded found. ``record``: this rescale's record (None: run a new rescale); ``pending``:
    the indexes of its targets still to commit (none: it is done); ``etag``: of the record in the target
    store, whichever rescale's (None: there is none); ``leftovers``: task -> snapshot of the sources' store
    that a recorded scale-in of it read and left behind (not state: layout.check_other_tasks)."""

    record: RescaleRecord | None = None
    etag: str | None = None
    pending: list[int] = field(default_factory=list)
    leftovers: dict[str, str] = field(default_factory=dict)


def check_recorded(opts: RescaleOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
                   sources_now: list[str]) -> Recorded:
    """Read the record of the target store and decide (module doc); ``sources_now``: the snapshot ids the
    sources resolve to now. RecordedRescaleError when it forbids this run. Writes nothing."""
    to_job = opts.to_job or opts.job
    try:
        rec, etag = read_rescale(blobstore, to_job, opts.job_id, opts.store)
    except MalformedRescaleRecord as e:
        if not opts.again:
            raise
        rec, etag = None, e.etag
    try:
        own = rec if to_job == opts.job else read_rescale(blobstore, opts.job, opts.job_id, opts.store)[0]
    except MalformedRescaleRecord:
        own = None  # what it says of the sources' store is unknown: no task of it is taken for a left-over
    leftovers = {}
    if own is not None and own.state == DONE and own.rescale.get("job") == own.rescale.get("to_job") == opts.job:
        made = {t.task for t in own.targets}
        leftovers = {s.task: s.snapshot_id for s in own.sources if s.task not in made}
    found = Recorded(None, etag, leftovers=leftovers)
    if rec is None or opts.again:
        return found
    if rec.rescale != identity(opts):
        if rec.state == COMMITTING:
            raise RecordedRescaleError(
                f"another rescale into store {opts.store} of {to_job} was cut in its commit ({_describe(rec)}, "
                f"recorded {iso_utc(rec.created_ms / 1000)})",
                hint="nothing was written; run that rescale again to commit the rest of its targets (--again sets "
                     "its record aside)")
        return found
    targets_now = [latest_id(checkpoints, StoreRef(to_job, opts.job_id, t.task, opts.store)) for t in rec.targets]
    problem = _changed(opts, rec, sources_now, targets_now)
    if problem:
        what = "was done" if rec.state == DONE else "was cut in its commit"
        raise RecordedRescaleError(f"this rescale {what} (recorded {iso_utc(rec.created_ms / 1000)} in "
                                   f"{rescale_key(to_job, opts.job_id, opts.store)}), and since then {problem}",
                                   hint="nothing was written; --again starts a new rescale of the sources' current "
                                        "snapshots (every check of a new rescale applies)")
    found.record = rec
    if rec.state != DONE:
        found.pending = [k for k, (t, now) in enumerate(zip(rec.targets, targets_now)) if now != t.snapshot_id]
    return found


def _describe(rec: RescaleRecord) -> str:
    r = rec.rescale
    return (f"{r.get('job')} {len(r.get('sources', []))} -> {r.get('to_job')} {len(r.get('targets', []))} tasks "
            f"by {r.get('partitioner')}")


def _changed(opts: RescaleOptions, rec: RescaleRecord, sources_now: list[str], targets_now: list[str | None]) \
        -> str | None:
    """What changed since ``rec`` was recorded that running it again cannot build on, or None."""
    same_job = (opts.to_job or opts.job) == opts.job
    made = {t.task: t.snapshot_id for t in rec.targets} if same_job else {}
    for s, now in zip(rec.sources, sources_now):
        if now != s.snapshot_id and now != made.get(s.task):
            return (f"source {s.task} has snapshot {now}, not the one this rescale read ({s.snapshot_id})"
                    + (" nor the one it made" if s.task in made else ""))
    if rec.state == COMMITTING:
        for t, now in zip(rec.targets, targets_now):
            if now not in (t.snapshot_id, t.before):
                return (f"target {t.task} has snapshot {now}, neither the one this rescale made ({t.snapshot_id}) "
                        "nor the one before it")
    return None


class Recorder:
    """Writes a rescale's record: ``committing`` before its first commit, ``done`` after its last."""

    def __init__(self, blobstore: BlobStore, opts: RescaleOptions, etag: str | None,
                 record: RescaleRecord | None = None):
        self.blobstore, self.opts, self.etag, self.record = blobstore, opts, etag, record

    def committing(self, checkpoints: BlobCheckpointStore, refs: list[StoreRef], result: RescaleResult) -> None:
        """Record a new rescale from ``result`` (its sources and uploaded targets; the targets' latest snapshots
        now, held under their leases, as ``before``); nothing for one run again (its record is written).
        RecordedRescaleError when another rescale recorded itself since this one read the record."""
        if self.record is not None:
            return
        targets = tuple(RecordedSnapshot(t.task, t.snapshot_id or "", t.checkpoint_id or "", t.keys, t.files, t.bytes,
                                         before=latest_id(checkpoints, ref)) for t, ref in zip(result.targets, refs))
        sources = tuple(RecordedSnapshot(s.task, s.snapshot_id, s.checkpoint_id, s.keys, s.files, s.bytes)
                        for s in result.sources)
        self.record = RescaleRecord(identity(self.opts), sources, targets, result.keys, result.content_hash,
                                    COMMITTING, now_ms())
        try:
            self.etag = write_rescale(self.blobstore, self.record, etag=self.etag)
        except PreconditionFailedError:
            raise RecordedRescaleError(f"another rescale into store {self.opts.store} of {refs[0].job} recorded "
                                       "itself while this one ran", hint="nothing was committed; run it again "
                                       "(it finds what the other one did)") from None

    def done(self, progress: ProgressReporter) -> None:
        """Mark the record done (every target committed)."""
        from dataclasses import replace

        assert self.record is not None
        try:
            self.etag = write_rescale(self.blobstore, replace(self.record, state=DONE), etag=self.etag)
        except PreconditionFailedError:
            progress.note(f"the record of this rescale changed while it committed (another rescale into store "
                          f"{self.opts.store}?); it was left as it is")


def report(rec: RescaleRecord, result: RescaleResult) -> None:
    """Fill ``result`` with what the recorded rescale read, verified and made."""
    result.sources = [SourceInfo(s.task, s.snapshot_id, s.checkpoint_id, s.files, s.bytes, s.keys) for s in rec.sources]
    result.targets = [TargetInfo(t.task, t.keys or 0, t.snapshot_id, t.checkpoint_id, t.files, t.bytes)
                      for t in rec.targets]
    result.keys, result.content_hash, result.verified = rec.keys, rec.content_hash, True


def finish(opts: RescaleOptions, found: Recorded, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
           result: RescaleResult, progress: ProgressReporter) -> None:
    """This rescale, recorded: say it is done, or commit the targets its cut commit left (module doc). A dry
    run writes nothing and says which it would commit."""
    rec = found.record
    assert rec is not None
    report(rec, result)
    to_job = opts.to_job or opts.job
    when = iso_utc(rec.created_ms / 1000)
    refs = [StoreRef(to_job, opts.job_id, rec.targets[k].task, opts.store) for k in found.pending]
    recorder = Recorder(blobstore, opts, found.etag, rec)
    if not refs:
        result.rerun, result.committed = "done", True
        progress.note(f"this rescale was done (recorded {when}): nothing to do")
        if rec.state != DONE and not opts.dry_run:  # the run that committed the last target was cut after it
            recorder.done(progress)
        return
    result.rerun = "finished"
    tasks = ", ".join(ref.task for ref in refs)
    targets = [rec.targets[k] for k in found.pending]
    pending = [_uploaded(opts, blobstore, checkpoints, ref, t) for ref, t in zip(refs, targets)]
    if opts.dry_run:
        progress.note(f"this rescale's commit was cut (recorded {when}): would commit {tasks} from its uploads")
        return
    progress.note(f"this rescale's commit was cut (recorded {when}): committing {tasks} from its uploads")
    with ExitStack() as stack:
        leases = take_leases(stack, opts, blobstore, checkpoints, refs, progress)
        for ref, t in zip(refs, targets):  # under the leases now: nothing else commits there
            if latest_id(checkpoints, ref) != t.before:
                raise RecordedRescaleError(f"target {ref.task} got a new snapshot while this rescale was checked",
                                           hint="nothing was written; run it again")
        markers = changelog_markers(checkpoints, refs)
        commit_targets(opts, blobstore, checkpoints, leases, pending, markers, recorder, result, progress,
                       committed_before=len(rec.targets) - len(refs))


def _uploaded(opts: RescaleOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore, ref: StoreRef,
              t: RecordedSnapshot) -> PendingTarget:
    """A recorded target's uploaded snapshot, every blob checked, ready to commit (reads only).
    RecordedRescaleError when its blobs are gone (gc reclaims uploads nothing committed once their grace or
    TTL ran out)."""
    from statectl.catalog.index import read_index
    from statectl.transfer.verify import check_blobs

    try:
        index = read_index(blobstore, t.snapshot_id, what="recorded target snapshot")
        present = list(index.dir_index.walk_present())
        problems = check_blobs(blobstore, present, opts.parallelism)
    except BlobNotFoundError as e:
        problems, first = [e], str(e)
    else:
        first = f"{problems[0].blob_id} of {problems[0].rel}: {problems[0].reason}" if problems else ""
    if problems:
        raise RecordedRescaleError(f"the snapshot this rescale uploaded for {ref.task} ({t.snapshot_id}) is no longer "
                                   f"whole: {first}",
                                   hint="nothing more was committed (gc reclaims uploads nothing committed): rescale "
                                        "the sources it read afresh, with --again and --snapshots FILE naming them "
                                        f"(the record {rescale_key(ref.job, ref.job_id, ref.store)} lists them)"
                                        + (", and --ignore-other-tasks" if ref.job == opts.job else ""))
    keep = max(opts.keep_last, 1 + len(checkpoints.list(ref)))
    record = CheckpointRecord(t.checkpoint_id, t.snapshot_id, index.creation_time_millis, keep_last=keep)
    return PendingTarget(ref, record, index, [b.blob_id for _, fi in present for b in fi.blobs])
