"""The run of a rescale (``rescale``): its plan (statectl.engine.rescale.plan) reported as a dry run, or
finished as the record of an earlier run says (statectl.engine.rescale.rerun), or executed on the hash path
(build, verify, upload, commit) or the key-group path (statectl.engine.rescale.keygroups) in a work dir of
its own. The package doc says what each step does."""

from __future__ import annotations

import time
from contextlib import nullcontext
from typing import Callable

from statectl.blobstore.base import BlobStore
from statectl.catalog.records import BlobCheckpointStore
from statectl.engine.rescale.build import Removal, WorkDir, build_targets, verify_targets
from statectl.engine.rescale.commit import WHAT
from statectl.engine.rescale.early import StartedAhead
from statectl.engine.rescale.options import RescaleOptions
from statectl.engine.rescale.plan import RescalePlan, check_partitioners, plan_rescale
from statectl.engine.rescale.rerun import Recorder, finish
from statectl.engine.rescale.result import RescaleResult, TargetInfo
from statectl.engine.rescale.upload import upload_targets
from statectl.progress import NoteRecorder, ProgressReporter


def rescale(opts: RescaleOptions, blobstore: BlobStore | Callable[[], BlobStore],
            checkpoints: BlobCheckpointStore | Callable[[], BlobCheckpointStore],
            progress: ProgressReporter | None = None) -> RescaleResult:
    """Re-partition the source snapshots into new target snapshots and commit them (see the package doc).
    ``blobstore`` and ``checkpoints``: the stores, or functions that open them (after the options are checked
    and a hash-path rescale's Spark job is started: its JVM starts while they open and the rescale is planned,
    and is killed when the plan refuses, or finds no Spark job needed).

    Raises UsageError for bad options (a partitioner that does not import among them); SnapshotNotFoundError
    (exit 10) for a source task without a snapshot (or without the named one); LayoutError (exit 1) when the
    sources are not the layout the options say (statectl.engine.rescale.layout); RecordedRescaleError
    (exit 1) when what the blob store records of this rescale, or of another one into the target store,
    forbids it (statectl.engine.rescale.rerun); MissingDependencyError (13) without pyspark or Java;
    StatectlError (exit 1) when the Spark job fails, e.g. on a damaged source snapshot (a file whose CRC32 or
    size differs from its index) or a source key outside its task; VerificationError (exit 1) when the
    targets do not hold exactly the sources' entries, each in its partitioner's task; LockHeldError (11) when
    a backup of a target store is running; PartialError (exit 3) when the commit of a target fails after
    others were committed (the commit step takes milliseconds: a broker or blob store failing right then).
    In every failure before the commit nothing is committed and the sources are untouched; the uploads made
    so far carry a TTL (gc reclaims them). A dry run makes every check but the Spark job's and writes nothing.

    Idempotent as a command: the rescale is recorded before its first commit, and the same rescale run again
    commits what a cut commit left, or, done, does nothing (statectl.engine.rescale.rerun).
    """
    began = time.monotonic()
    notes = NoteRecorder(progress)
    opts.validate()
    check_partitioners(opts)
    with StartedAhead(opts) as ahead:
        blobstore = blobstore() if callable(blobstore) else blobstore
        checkpoints = checkpoints() if callable(checkpoints) else checkpoints
        plan = plan_rescale(opts, blobstore, checkpoints)
        if plan.recorded.record is not None:
            ahead.cancel()  # no Spark job: the recorded rescale's uploads are committed, or it is done
            finish(plan.opts, plan.recorded, blobstore, checkpoints, plan.result, notes)
        elif plan.opts.dry_run:
            _dry_run(plan)
        else:
            execute_rescale(plan, blobstore, checkpoints, notes, ahead)
    plan.result.notes = notes.notes
    plan.result.duration_s = round(time.monotonic() - began, 3)
    return plan.result


def _dry_run(plan: RescalePlan) -> None:
    """Check what the run's Spark job checks before it starts; the targets as planned, or by name."""
    if plan.runs_spark:
        from statectl.spark.probe import require_spark

        require_spark(WHAT)
    if not plan.result.targets:
        plan.result.targets = [TargetInfo(t, 0) for t in plan.opts.target_tasks]


def execute_rescale(plan: RescalePlan, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
                    progress: ProgressReporter, ahead: StartedAhead | None = None) -> None:
    """Run a planned new rescale in a work dir of its own (removed at the end; ``ahead``'s when it started the
    Spark job): the hash path, or the key-group path (statectl.engine.rescale.keygroups); ``plan.result`` gets
    what it did."""
    opts, result = plan.opts, plan.result
    recorder = Recorder(blobstore, opts, plan.recorded.etag)
    with (nullcontext(ahead.work) if ahead is not None and ahead.work is not None else WorkDir(opts.work_dir)) as work:
        if plan.key_groups is None:
            from statectl.engine.rescale.early import EarlyUploads

            removal = Removal()  # the staged stores and the job's files, once uploaded: beside the commit
            try:
                with EarlyUploads(blobstore, opts, work / "build") as early:
                    stores, manifest = build_targets(opts, plan.snapshots, blobstore, work, result, progress,
                                                     ahead.started if ahead is not None else None)
                    verify_targets(opts, stores, manifest, result)
                    upload_targets(opts, plan.to_job, stores, blobstore, checkpoints, result, progress, recorder,
                                   early=early, uploaded=lambda: removal.start(work / "stores", work / "build"))
            finally:
                removal.join()  # before the work dir goes
        else:
            from statectl.engine.rescale.keygroups import rescale_key_groups

            rescale_key_groups(plan, blobstore, checkpoints, work, progress, recorder)
