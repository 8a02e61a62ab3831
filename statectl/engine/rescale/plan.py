"""The plan of a rescale: every check and read that comes before the Spark job, writing nothing. The options
are checked (their partitioners import here), the source snapshots resolved, what the blob store records of
this rescale read (statectl.engine.rescale.rerun), the sources checked to be the ``--from`` layout
(statectl.engine.rescale.layout) and, for a key-group store, the copies and reads planned
(statectl.engine.rescale.keygroup_plan). A dry run reports the plan; statectl.engine.rescale.execute runs it."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from statectl.blobstore.base import BlobStore
from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.refs import StoreRef
from statectl.catalog.resolve import resolve_snapshot
from statectl.engine.rescale.keygroup_plan import KeyGroupPlan
from statectl.engine.rescale.layout import check_sources, has_wal
from statectl.engine.rescale.options import RescaleOptions
from statectl.engine.rescale.rerun import Recorded, check_recorded
from statectl.engine.rescale.result import RescaleResult, SourceInfo, TargetInfo
from statectl.errors import UsageError
from statectl.local.layout import NEVER_UPLOADED
from statectl.snapshot.model import files_owner, parse_file_owner


@dataclass
class RescalePlan:
    """A rescale checked and ready to run. ``opts``: with the key-group partitioner set; ``result``: the
    sources (and, planned, the targets) as the command reports them; ``snapshots``: the sources as
    BuildSpec.snapshots holds them, with their ``indexes``; ``recorded``: what the blob store records of
    this rescale (its ``record`` set: run again, nothing to plan); ``manifests``: the sources' MANIFESTs;
    ``key_groups``: the copies and reads of a key-group rescale (None: the hash path)."""

    opts: RescaleOptions
    result: RescaleResult
    snapshots: list[dict[str, Any]]
    indexes: list[Any]
    recorded: Recorded
    manifests: list[Any]
    key_groups: KeyGroupPlan | None = None

    @property
    def to_job(self) -> str:
        return self.opts.to_job or self.opts.job

    @property
    def runs_spark(self) -> bool:
        """Whether running it starts a Spark job (a key-group rescale that only copies files does not)."""
        kg = self.key_groups
        return kg is None or bool(kg.whole)


def plan_rescale(opts: RescaleOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore) -> RescalePlan:
    """Check ``opts`` and the sources and plan the rescale; reads only. Raises what statectl.engine.rescale.execute
    .rescale lists for the steps before the Spark job."""
    opts.validate()
    check_partitioners(opts)
    if opts.key_groups is not None:
        from statectl.formats.keygroups import PARTITIONER_PREFIX

        opts = replace(opts, partitioner=f"{PARTITIONER_PREFIX}{opts.key_groups}")
    result = RescaleResult(opts.store, opts.job, opts.to_job or opts.job, opts.from_tasks, opts.to_tasks, 0,
                           opts.partitioner or "murmur2", [], [], dry_run=opts.dry_run, key_groups=opts.key_groups)
    t0 = time.monotonic()
    snapshots, indexes = resolve_sources(opts, blobstore, checkpoints, result)
    found = check_recorded(opts, blobstore, checkpoints, [s.snapshot_id for s in result.sources])
    plan = RescalePlan(opts, result, snapshots, indexes, found, [])
    if found.record is not None:
        return plan
    plan.manifests = check_sources(opts, blobstore, checkpoints, indexes, found.leftovers)
    if opts.key_groups is not None:
        plan.key_groups = plan_key_groups(opts, plan.manifests, indexes, result)
    result.phases["resolve_s"] = round(time.monotonic() - t0, 3)
    return plan


def check_partitioners(opts: RescaleOptions) -> None:
    """UsageError for a partitioner that does not import here, before anything runs: statectl's own
    verification routes every key with it too."""
    from statectl.spark.context import BuildError
    from statectl.spark.rescale_reader import load_partitioner

    for flag, name in (("--partitioner", opts.partitioner), ("--from-partitioner", opts.from_partitioner)):
        try:
            load_partitioner(name)
        except BuildError as e:
            raise UsageError(f"{flag}: {e}", hint="it must import where statectl runs and where the executors run "
                                                  "(e.g. through PYTHONPATH); nothing was run") from None


def resolve_sources(opts: RescaleOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
                    result: RescaleResult) -> tuple[list[dict[str, Any]], list[Any]]:
    """Resolve every source's snapshot (the latest, or the one --snapshots names) into ``result.sources``;
    return them as BuildSpec.snapshots holds them, and their indexes."""
    from concurrent.futures import ThreadPoolExecutor

    snapshots = []
    indexes = []
    tasks = opts.source_tasks
    # every source's catalog and index read at once; the first source in order that fails raises
    with ThreadPoolExecutor(max(1, min(len(tasks), opts.parallelism)), thread_name_prefix="statectl-resolve") as pool:
        resolved = list(pool.map(lambda task: resolve_snapshot(blobstore, checkpoints, StoreRef(
            opts.job, opts.job_id, task, opts.store), opts.snapshots.get(task)), tasks))
    for task, snap in zip(tasks, resolved):
        files = [{"path": rel, "size": fi.file_metadata.size, "checksum": fi.checksum,
                  "blobs": [[b.blob_id, b.offset] for b in fi.blobs]}
                 for rel, fi in snap.index.dir_index.walk_present() if Path(rel).name not in NEVER_UPLOADED]
        snapshots.append({"task": task, "snapshot": snap.index_blob_id, "files": files})
        indexes.append(snap.index)
        result.sources.append(SourceInfo(task, snap.index_blob_id, snap.index.snapshot_metadata.checkpoint_id,
                                         len(files), sum(f["size"] for f in files)))
    owner = parse_file_owner(opts.file_owner) if opts.file_owner else files_owner([i.dir_index for i in indexes])
    result.file_owner = ":".join(owner) if owner else ""
    return snapshots, indexes


def plan_key_groups(opts: RescaleOptions, manifests: list[Any], indexes: list[Any],
                    result: RescaleResult) -> KeyGroupPlan:
    """Plan the copies, range deletions and sources read whole (keygroup_plan.plan) from every source's
    MANIFEST (a source with a non-empty WAL is read whole); the plan's figures go into ``result`` (a dry run
    reports them)."""
    from statectl.engine.rescale.keygroup_plan import plan

    checksums = [{rel: fi.checksum for rel, fi in index.dir_index.walk_present()} for index in indexes]
    p = plan([None if has_wal(index) else m for m, index in zip(manifests, indexes)], checksums, opts.from_tasks,
             opts.to_tasks, opts.key_groups or 0)
    src = result.sources
    result.targets = [TargetInfo(task, 0, files_copied=len(t.copies), bytes_copied=t.bytes_copied,
                                 files_read=sum(src[i].files for i in t.whole),
                                 bytes_read=sum(src[i].bytes for i in t.whole))
                      for task, t in zip(opts.target_tasks, p.targets)]
    result.bytes_copied = sum(t.bytes_copied for t in p.targets)
    result.files_copied = sum(len(t.copies) for t in p.targets)
    result.files_rewritten = sum(src[i].files for i in p.whole)
    result.bytes_rewritten = sum(src[i].bytes for i in p.whole)
    return p
