"""What a blob store's catalog holds, level by level (jobs, then a job's stores and tasks), from one listing
of its checkpoint records; and the error for a job, job id, store or task it does not hold, naming the
nearest ones it does (a mistyped name must not read as "no snapshots")."""

from __future__ import annotations

import difflib
from collections import defaultdict
from dataclasses import dataclass, field

from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.refs import StoreRef, is_checkpoint_id, parse_checkpoint_id
from statectl.errors import Command, Hint, SnapshotNotFoundError, command


@dataclass
class CatalogTree:
    """Checkpoint ids recorded per store (catalog records of any state), from one listing."""

    checkpoints: dict[StoreRef, list[str]] = field(default_factory=dict)

    @classmethod
    def read(cls, catalog: BlobCheckpointStore, job: str | None = None, *, job_id: str | None = None) -> "CatalogTree":
        """List the catalog (of every job, or only of ``job``). One listing request (paged); no record
        is read. With ``job`` and ``job_id``, the stores of that job only its commit log knows (a Kafka
        checkpoint topic: committed by a Samza job) are added with their latest checkpoint. Raises what
        the blob store's list (and the commit log) raise."""
        found: dict[StoreRef, list[str]] = defaultdict(list)
        for ref, checkpoint_id in catalog.entries(job):
            if is_checkpoint_id(checkpoint_id):
                found[ref].append(checkpoint_id)
        if job is not None and job_id is not None:
            for ref, (checkpoint_id, _) in commit_log_latest(catalog, job, job_id).items():
                if ref not in found:
                    found[ref] = [checkpoint_id]
        for ids in found.values():
            ids.sort(key=parse_checkpoint_id, reverse=True)
        return cls(dict(found))

    def jobs(self) -> list[tuple[str, str]]:
        """(job, job id) pairs, sorted."""
        return sorted({(r.job, r.job_id) for r in self.checkpoints})

    def refs(self, job: str, job_id: str, store: str | None = None) -> list[StoreRef]:
        """The stores (one per task) of a job, or of one of its stores, sorted by store then task."""
        return sorted((r for r in self.checkpoints
                       if (r.job, r.job_id) == (job, job_id) and (store is None or r.store == store)),
                      key=lambda r: (r.store, r.task))

    def unknown(self, job: str, job_id: str, store: str | None = None, task: str | None = None,
                *, where: str) -> SnapshotNotFoundError | None:
        """The error to raise when the catalog holds nothing of ``job`` (with ``job_id``), of its
        ``store``, or of that store's ``task`` (each checked only when given), naming the nearest names
        it does hold (difflib); None when it holds something of each. ``where`` names the blob store in
        the message; a ``task`` without a ``store`` is checked against every store's tasks.
        SnapshotNotFoundError: exit 10, as a missing snapshot."""
        names = sorted({j for j, _ in self.jobs()})
        if job not in names:
            return SnapshotNotFoundError(f"unknown job {job!r}: {where} holds no snapshot of it",
                                         hint=_nearest("jobs", job, names,
                                                       command("snapshots list", without=STORE_FLAGS)))
        ids = sorted({i for j, i in self.jobs() if j == job})
        if job_id not in ids:
            return SnapshotNotFoundError(f"job {job!r} has no snapshots with job id {job_id!r} in {where}",
                                         hint=f"its job ids there: {', '.join(ids)} (pass --job-id)")
        refs = self.refs(job, job_id)
        if store is None:
            tasks = sorted({r.task for r in refs})
            if task is None or task in tasks:
                return None
            return SnapshotNotFoundError(f"unknown task {task!r} of job {job!r} (id {job_id}): {where} holds no "
                                         "snapshot of it",
                                         hint=_nearest("tasks of the job", task, tasks,
                                                       _stores_of(job)))
        stores = sorted({r.store for r in refs})
        if store not in stores:
            return SnapshotNotFoundError(f"unknown store {store!r} of job {job!r} (id {job_id}): {where} holds "
                                         "no snapshot of it",
                                         hint=_nearest("stores of the job", store, stores,
                                                       _stores_of(job)))
        if task is None:
            return None
        tasks = [r.task for r in refs if r.store == store]
        if task not in tasks:
            return SnapshotNotFoundError(f"unknown task {task!r} of store {store!r} of job {job!r} (id {job_id}): "
                                         f"{where} holds no snapshot of it",
                                         hint=_nearest("tasks of the store", task, tasks,
                                                       _stores_of(job)))
        return None


# What a listing of the jobs, or of one job's stores and tasks, must not take from the command that failed.
STORE_FLAGS = ("job", "job_id", "task", "store")


def _stores_of(job: str) -> Command:
    """The command that lists the stores and tasks of ``job`` (of the job id the invocation gave)."""
    return command("snapshots list", "--job", job, without=("task", "store"))


def _nearest(what: str, name: str, names: list[str], lister: Command) -> Hint:
    """The hint for an unknown ``name``: the nearest of ``names`` (difflib), else the first ten of them,
    with the command (``lister``) that lists them all."""
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    if close:
        return f"did you mean {' or '.join(repr(c) for c in close)}? (", lister, f" lists the {what})"
    if not names:
        return "the blob store holds no snapshots at all: check --blobstore"
    shown = ", ".join(repr(n) for n in names[:10]) + (", ..." if len(names) > 10 else "")
    return f"the {what}: {shown} (", lister, " lists them)"


def check_known(catalog: BlobCheckpointStore, job: str, job_id: str, store: str | None = None,
                task: str | None = None, *, tree: CatalogTree | None = None) -> None:
    """Raise CatalogTree.unknown's error when the catalog holds nothing of ``job`` / ``job_id`` /
    ``store`` / ``task`` (each checked only when given). Lists the job's records (``tree`` when the
    caller has listed them already), and every job's only when the job is unknown."""
    where = catalog.blobstore.url
    tree = tree if tree is not None else CatalogTree.read(catalog, job, job_id=job_id)
    if not any(r.job == job for r in tree.checkpoints):
        tree = CatalogTree.read(catalog)
    error = tree.unknown(job, job_id, store, task, where=where)
    if error is not None:
        raise error


def commit_log_latest(catalog: BlobCheckpointStore, job: str, job_id: str) -> dict[StoreRef, tuple[str, str]]:
    """With a commit log that knows jobs (the Kafka checkpoint topics): (checkpoint id, index blob id) of the
    latest checkpoint of each store of each task of the job there, e.g. ones a Samza job committed, which
    have no catalog record. Empty without such a commit log, or when the job has no checkpoint topic.
    Raises StatectlError when the brokers cannot be reached."""
    from statectl.formats.checkpoint import BLOB_STORE_FACTORY

    for_job = getattr(catalog.commit_log, "for_job", None)
    if for_job is None:
        return {}
    try:
        latest, _ = for_job(job, job_id).latest_checkpoints()
    except SnapshotNotFoundError:  # no checkpoint topic
        return {}
    out = {}
    for task, cp in latest.items():
        for store, index_blob_id in cp.state_checkpoint_markers.get(BLOB_STORE_FACTORY, {}).items():
            try:
                out[StoreRef(job, job_id, task, store)] = (cp.checkpoint_id, index_blob_id)
            except Exception:  # a name statectl cannot use as a key: not listed
                continue
    return out
