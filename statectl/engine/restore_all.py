"""restore --all / --all-tasks: every store of every task of a job (or of one container of it, from the job
model) restored from the blob store in one run, each into its Samza place under the state dir
(``<state-dir>/<store>/<task, spaces -> _>``, as a restore with --store and --task puts it).

Each store is one ``engine.restore.restore`` (its pin, its plan, its staged swap; a failure leaves its store
as it was), several at once (engine.at_once: at most ``stores_at_once`` stores in flight, sharing the
transfers of ``parallelism``). A store that fails is listed and does not stop the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statectl import defaults
from statectl.blobstore.base import BlobStore
from statectl.catalog.listing import CatalogTree, check_known
from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.refs import StoreRef
from statectl.engine.at_once import STORES_AT_ONCE, SharedProgress, run_at_once, shares
from statectl.engine.restore import RestoreOptions, RestorePlan, RestoreResult, plan_restore, restore
from statectl.errors import NotFoundError, SnapshotNotFoundError, StatectlError, UsageError, one_cause
from statectl.local.layout import store_dir
from statectl.parallel import check_parallelism
from statectl.progress import NullProgress, ProgressReporter
from statectl.ratelimit import RateLimit


@dataclass(frozen=True)
class RestoreAllOptions:
    """What to restore: the latest snapshot of every task of ``ref.store`` (``"*"``: of every store) of job
    ``ref.job``-``ref.job_id`` the blob store holds, each into its store dir under ``state_dir``.
    ``container``: only the tasks the job model assigns to that container (read from the job's coordinator
    stream on ``kafka``, or a standalone job's from ``zookeeper``); a task of it with no snapshot of a store is
    a failure. ``force``: as RestoreOptions'."""

    ref: StoreRef
    state_dir: Path
    parallelism: int = defaults.PARALLELISM
    stores_at_once: int = STORES_AT_ONCE
    force: bool = False
    container: str | None = None
    kafka: str | None = None
    zookeeper: str | None = None
    kafka_security: Any = None
    rate_limit: RateLimit | None = None  # one bucket shared by every store's transfers

    def validate(self) -> None:
        check_parallelism(self.parallelism)
        if self.stores_at_once < 1:
            raise UsageError("stores at once must be at least 1")
        if self.container is not None and not self.kafka:
            raise UsageError("--container reads the job model on the job's coordinator stream: it needs --kafka")


@dataclass
class RestoreAllResult:
    """A result per store restored (with ``dry_run``, its plan), in store then task order, and the store dirs
    that failed, each with its error."""

    results: list[RestoreResult | RestorePlan]
    failures: list[tuple[str, str]]
    blobstore: str = ""
    dry_run: bool = False
    container: str | None = None


def restore_all(opts: RestoreAllOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
                progress: ProgressReporter | None = None, *, dry_run: bool = False) -> RestoreAllResult:
    """Restore (``dry_run``: plan, engine.restore.plan_restore) the latest snapshot of every store of
    ``opts`` into its store dir. The stores are those the catalog holds for the job (with a Kafka commit log
    also those only the job's checkpoint topic knows), every task of each, or the tasks of ``opts.container``.

    Raises SnapshotNotFoundError (exit 10) when the blob store holds nothing of the job (or store), and the
    job model's errors for ``container`` (no coordinator stream, no such container: exit 10); those come
    before any store is touched. A store whose restore fails (any error restore raises: a damaged snapshot,
    a held or refused target, a full disk) is listed in ``failures``, its store dir as it was, and the others
    go on (the CLI exits 3); when every store failed with the same error, that error is raised. Ctrl-C stops
    the restores in flight (each leaves its store as it was) and is raised once they have."""
    opts.validate()
    progress = progress if progress is not None else NullProgress()
    refs, failures = _selected(opts, blobstore, checkpoints)
    at_once, each = shares(len(refs), opts.parallelism, opts.stores_at_once)
    shared = SharedProgress(progress)

    def one(ref: StoreRef) -> RestoreResult | RestorePlan:
        ro = RestoreOptions(ref=ref, store_dir=store_dir(opts.state_dir, ref.store, ref.task), parallelism=each,
                            force=opts.force, state_dir=opts.state_dir, rate_limit=opts.rate_limit)
        return (plan_restore if dry_run else restore)(ro, blobstore, checkpoints, shared)

    if not dry_run:
        progress.start(f"restoring {len(refs)} store{'s' if len(refs) != 1 else ''}", 0, 0)
    try:
        outcomes = run_at_once(refs, one, at_once, shared)
    finally:
        if not dry_run:
            progress.stop()
    results = [o for o in outcomes if not isinstance(o, StatectlError)]
    errors = [o for o in outcomes if isinstance(o, StatectlError)]
    failures += [(str(store_dir(opts.state_dir, r.store, r.task)), str(o))
                 for r, o in zip(refs, outcomes) if isinstance(o, StatectlError)]
    cause = one_cause(errors, len(failures), len(results))
    if cause is not None:
        raise cause
    return RestoreAllResult(results, failures, blobstore.url, dry_run, opts.container)


def _selected(opts: RestoreAllOptions, blobstore: BlobStore,
              checkpoints: BlobCheckpointStore) -> tuple[list[StoreRef], list[tuple[str, str]]]:
    """The stores to restore, sorted by store then task, and (with a container) the failures for the
    container's tasks the blob store holds no snapshot of a store of."""
    job, job_id = opts.ref.job, opts.ref.job_id
    store = None if opts.ref.store == "*" else opts.ref.store
    tree = CatalogTree.read(checkpoints, job, job_id=job_id)
    check_known(checkpoints, job, job_id, store, tree=tree)
    refs = tree.refs(job, job_id, store)
    if opts.container is None:
        return refs, []
    tasks = _container_tasks(opts)
    stores = sorted({r.store for r in refs})
    failures = [(str(store_dir(opts.state_dir, s, t)),
                 f"no snapshot of store {s} of task {t!r} (container {opts.container}) in {blobstore.url}")
                for s in stores for t in tasks if StoreRef(job, job_id, t, s) not in refs]
    chosen = [r for r in refs if r.task in tasks]
    if not chosen:
        raise SnapshotNotFoundError(f"{blobstore.url} holds no snapshot of a task of container {opts.container} "
                                    f"of job {job}-{job_id} (its tasks: {', '.join(tasks)})",
                                    hint="'statectl snapshots list --job NAME' lists the tasks it holds")
    return chosen, failures


def _container_tasks(opts: RestoreAllOptions) -> tuple[str, ...]:
    """The active tasks of ``opts.container`` (an active container, or a standby container: its active's)
    in the job model (engine.jobmodel.read_job_model)."""
    from statectl.engine.standby.container import container_of
    from statectl.engine.jobmodel import read_job_model

    assert opts.kafka is not None  # validate
    model, _ = read_job_model(opts.kafka, opts.ref.job, opts.ref.job_id, zookeeper=opts.zookeeper,
                              security=opts.kafka_security, required=True)
    if model is None:  # required: NotFoundError instead
        raise NotFoundError(f"no job model of job {opts.ref.job}-{opts.ref.job_id}")
    return container_of(model, opts.container or "")[2]
