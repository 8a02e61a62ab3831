"""rescale --key-groups: the key-group path of a rescale (the package doc), planned by
statectl.engine.rescale.keygroup_plan. Each source's MANIFEST gives its files' key ranges; the files inside a
target's key groups are copied server-side into the target's snapshot unread, the others go through the hash
path's Spark job cut down to them, and each target is its copies plus its partial store's files under a
MANIFEST written for them, uploaded and committed as the hash path commits."""

from __future__ import annotations

import os
from dataclasses import replace as dc_replace
from pathlib import Path
from typing import Any

from statectl.blobstore.base import BlobStore
from statectl.catalog.records import BlobCheckpointStore
from statectl.engine.rescale.build import VerificationError, build_targets, verify_targets
from statectl.engine.rescale.keygroup_plan import KeyGroupPlan, TargetPlan, check_target, partial_level
from statectl.engine.rescale.options import RescaleOptions
from statectl.engine.rescale.plan import RescalePlan
from statectl.engine.rescale.upload import upload_targets
from statectl.local.layout import task_dir_name
from statectl.progress import ProgressReporter
from statectl.rocks.manifest import LiveFile


def rescale_key_groups(plan: RescalePlan, blobstore: BlobStore, checkpoints: BlobCheckpointStore, work: Path,
                       progress: ProgressReporter, recorder: Any) -> None:
    """The key-group path: the executors rewrite the read files' keys into one partial store per target
    (the hash path's job, on sources cut down to their read files), verified as the hash path verifies;
    each target is then its partial store's files plus the copied files, under a MANIFEST written for them;
    the copies are made server-side (TTL'd) and the whole is uploaded and committed as the hash path
    commits."""
    from statectl.rocks.manifest import manifest_bytes, write_store_files

    opts, p, result = plan.opts, plan.key_groups, plan.result
    assert p is not None
    manifests_of = [None if i in p.whole else m for i, m in enumerate(plan.manifests)]
    partial = _build_partials(plan, manifests_of, blobstore, work, progress)
    last_sequence = max((m.last_sequence for m in manifests_of if m is not None), default=0)
    files_of = [dict(idx.dir_index.walk_present()) for idx in plan.indexes]
    assembled, copied = [], []
    for k, (task, t) in enumerate(zip(opts.target_tasks, p.targets)):
        out = work / "targets" / task_dir_name(task)
        out.mkdir(parents=True)
        listed, copies = _copy_files(opts, t, files_of, blobstore, progress)
        copied.append(copies)
        if partial[k] is not None:
            last_sequence = max(last_sequence, _link_partial(partial[k], out, listed))
        problems = check_target(listed, t.first, t.last, p.groups)
        if problems:
            raise VerificationError(f"rescale verification failed, nothing was committed: target {task}: {problems[0]}",
                                    hint="the source snapshots are untouched")
        number = len(listed) + 1
        write_store_files(out, manifest_bytes(listed, next_file_number=number + 1, last_sequence=last_sequence),
                          number)
        result.targets[k].files = len(listed)
        assembled.append(out)
    result.verified = True
    upload_targets(opts, plan.to_job, assembled, blobstore, checkpoints, result, progress, recorder, copied=copied)


def _build_partials(plan: RescalePlan, manifests_of: list[Any], blobstore: BlobStore, work: Path,
                    progress: ProgressReporter) -> list[Path | None]:
    """Per target, the partial store the executors wrote of the read files' keys, verified (None: nothing read
    for it). The temporary MANIFESTs the executors read the sources by are deleted at the end."""
    opts, p, result = plan.opts, plan.key_groups, plan.result
    assert p is not None
    partial: list[Path | None] = [None] * opts.to_tasks
    temp: list[str] = []
    try:
        if p.whole or p.reads:
            sources, temp = _read_sources(opts, p, plan.snapshots, manifests_of, blobstore)
            keep = result.sources
            result.sources = [s for s in keep if any(src["task"] == s.task for src in sources)]
            try:
                stores, manifest = build_targets(opts, sources, blobstore, work, result, progress)
                verify_targets(opts, stores, manifest, result)
            finally:
                result.sources = keep
            partial = list(stores)
        else:
            result.verified = True
    finally:
        if temp:
            blobstore.delete(temp)
    return partial


def _copy_files(opts: RescaleOptions, t: TargetPlan, files_of: list[dict[str, Any]], blobstore: BlobStore,
                progress: ProgressReporter) -> tuple[list[LiveFile], list[Any]]:
    """The files target ``t`` copies: listed (LiveFiles) under the numbers 1.. in the order of their epochs and
    sequence numbers, and their blobs copied server-side (TTL'd) under the FileIndexes returned."""
    from statectl.transfer.copy import copy_blobs
    from statectl.transfer.download import blob_ranges

    listed: list[LiveFile] = []
    copies = []
    jobs: list[tuple[str, int]] = []
    for epoch, sf in enumerate(sorted(t.copies, key=lambda sf: (sf.file.epoch, sf.file.largest_seqno,
                                                                sf.source, sf.file.number)), start=2):
        number = len(listed) + 1
        listed.append(dc_replace(sf.file, number=number, epoch=epoch))
        fi = files_of[sf.source][sf.file.name]
        copies.append((fi, f"{number:06d}.sst"))
        jobs += [(blob_id, length) for blob_id, _, length in blob_ranges(fi, f"file {sf.file.name}")]
    new_ids = copy_blobs(jobs, blobstore, blobstore, True, ttl_seconds=opts.ttl_seconds,
                         parallelism=opts.parallelism, progress=progress) if jobs else []
    ids = iter(new_ids)
    return listed, [dc_replace(fi, file_name=name, blobs=tuple(dc_replace(b, blob_id=next(ids)) for b in fi.blobs))
                    for fi, name in copies]


def _link_partial(partial: Path, out: Path, listed: list[LiveFile]) -> int:
    """Hard-link the partial store's files into ``out`` after the ``listed`` ones (appended to it), at the level
    partial_level picks; return their largest sequence number (0: none)."""
    from statectl.rocks.manifest import read_store_manifest

    mine = read_store_manifest(partial).live_files
    level = partial_level(listed, [(f.smallest_key, f.largest_key) for f in mine])
    top = 0
    for f in mine:
        number = len(listed) + 1
        os.link(partial / f.name, out / f"{number:06d}.sst")
        listed.append(dc_replace(f, number=number, level=level, epoch=1))
        top = max(top, f.largest_seqno)
    return top


def _read_sources(opts: RescaleOptions, p: KeyGroupPlan, snapshots: list[dict[str, Any]], manifests_of: list[Any],
                  blobstore: BlobStore) -> tuple[list[dict[str, Any]], list[str]]:
    """The sources the executors read, as BuildSpec.snapshots: a whole source as it is; any other its read
    files with a MANIFEST (and CURRENT) that lists only them at their levels, uploaded as TTL'd blobs, so
    that RocksDB opens exactly those files. Also the ids of those blobs."""
    import io
    import zlib

    from statectl.rocks.manifest import manifest_bytes

    out, temp = [], []

    def put(data: bytes) -> dict[str, Any]:
        blob = blobstore.put(io.BytesIO(data), size=len(data), ttl_seconds=opts.ttl_seconds)
        temp.append(blob)
        return {"size": len(data), "checksum": zlib.crc32(data), "blobs": [[blob, 0]]}

    from statectl.formats.keygroups import task_range

    for i, snap in enumerate(snapshots):
        # a source contributes the keys of its own key groups only (as Flink clips a restored store to its
        # key-group range): what a file holds beyond them is another task's, or deleted there
        groups = list(task_range(i, opts.from_tasks, p.groups))
        if i in p.whole:
            out.append({**snap, "groups": groups})
            continue
        reads = p.reads.get(i)
        if not reads:
            continue
        m = manifests_of[i]
        by_path = {f["path"]: f for f in snap["files"]}
        number = m.next_file_number
        data = manifest_bytes([f.file for f in reads], next_file_number=number + 1, last_sequence=m.last_sequence,
                              comparator=m.comparator)
        name = f"MANIFEST-{number:06d}"
        files = [by_path[f.file.name] for f in reads]
        files += [{"path": name, **put(data)}, {"path": "CURRENT", **put(name.encode() + b"\n")}]
        out.append({"task": snap["task"], "snapshot": snap["snapshot"], "files": files, "groups": groups})
    return out, temp
