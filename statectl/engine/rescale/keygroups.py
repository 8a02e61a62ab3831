"""rescale --key-groups: the key-group path of a rescale (the package doc), planned by
statectl.engine.rescale.keygroup_plan. Every file a target lists is copied server-side into the target's
snapshot, unread; the key groups its files hold beyond its own are clipped off by range deletions in small
SST files of its own (statectl.rocks.rangedel); a source the plan reads whole goes through the hash path's
Spark job cut down to it. Each target is its copies, its range deletions and its partial store's files under
a MANIFEST written for them, uploaded and committed as the hash path commits."""

from __future__ import annotations

import os
import time
from dataclasses import replace as dc_replace
from pathlib import Path
from typing import Any

from statectl.blobstore.base import BlobStore
from statectl.catalog.records import BlobCheckpointStore
from statectl.engine.rescale.build import VerificationError, build_targets, verify_targets
from statectl.engine.rescale.keygroup_plan import KeyGroupPlan, check_target, partial_level
from statectl.engine.rescale.options import RescaleOptions
from statectl.engine.rescale.plan import RescalePlan
from statectl.engine.rescale.upload import upload_targets
from statectl.local.layout import task_dir_name
from statectl.progress import ProgressReporter
from statectl.rocks.manifest import LiveFile


def rescale_key_groups(plan: RescalePlan, blobstore: BlobStore, checkpoints: BlobCheckpointStore, work: Path,
                       progress: ProgressReporter, recorder: Any) -> None:
    """The key-group path: the sources read whole go through the executors into one partial store per target
    (the hash path's job, on those sources only), verified as the hash path verifies; every other file a
    target lists is copied server-side (TTL'd); each target is then its copies, its range deletions (at
    sequence numbers above every file's) and its partial store's files, under a MANIFEST written for them,
    uploaded and committed as the hash path commits. The copies run in the background: the range deletions,
    the MANIFESTs, the targets' leases and the upload of their own files overlap them, and only the targets'
    indexes wait for them."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from statectl.rocks.rangedel import write_range_deletions

    opts, p, result = plan.opts, plan.key_groups, plan.result
    assert p is not None
    partial = _build_partials(plan, blobstore, work, progress)
    listed, renamed, jobs = _plan_copies(p, plan.indexes)
    cancel = threading.Event()
    with ThreadPoolExecutor(1, thread_name_prefix="statectl-copies") as pool:
        copying = pool.submit(_copy, opts, jobs, blobstore, progress, cancel, result.phases)
        try:
            # the range deletions need to lie above the copied files only (the partial stores' keys are the
            # target's own)
            top = max((m.last_sequence for m in plan.manifests if m is not None), default=0)
            written = write_range_deletions(work / "clips", [r for t in p.targets for r in t.clips], top)
            outs = _write_targets(plan, partial, written, listed, work, top)
            upload_targets(opts, plan.to_job, outs, blobstore, checkpoints, result, progress, recorder,
                           copies=lambda: _with_ids(renamed, copying.result()))
        except BaseException:
            cancel.set()  # what is copied so far carries its TTL: gc reclaims it
            raise


def _write_targets(plan: RescalePlan, partial: list[Path | None], written: list[tuple[Path, LiveFile]],
                   listed: list[list[LiveFile]], work: Path, top: int) -> list[Path]:
    """Each target's dir: its partial store's files and range deletions after its ``listed`` copies (appended
    to it), checked, under a MANIFEST and CURRENT written for them; return the dirs."""
    from statectl.rocks.manifest import manifest_bytes, write_store_files

    opts, p, result = plan.opts, plan.key_groups, plan.result
    assert p is not None
    outs = []
    for k, task in enumerate(opts.target_tasks):
        outs.append(work / "targets" / task_dir_name(task))
        outs[k].mkdir(parents=True)
        if partial[k] is not None:
            top = max(top, _link_partial(partial[k], outs[k], listed[k]))
    last_sequence = max(top, _place_clips(p, written, outs, listed))
    for k, (task, t, out) in enumerate(zip(opts.target_tasks, p.targets, outs)):
        problems = check_target(listed[k], t.clips, t.first, t.last, p.groups)
        if problems:
            raise VerificationError(f"rescale verification failed, nothing was committed: target {task}: {problems[0]}",
                                    hint="the source snapshots are untouched")
        number = len(listed[k]) + 1
        write_store_files(out, manifest_bytes(listed[k], next_file_number=number + 1, last_sequence=last_sequence),
                          number)
        result.targets[k].files = len(listed[k])
    result.verified = True
    return outs


def _build_partials(plan: RescalePlan, blobstore: BlobStore, work: Path,
                    progress: ProgressReporter) -> list[Path | None]:
    """Per target, the partial store the executors wrote of the keys of the sources read whole, verified
    (None: no source is read whole)."""
    from statectl.formats.keygroups import task_range

    opts, p, result = plan.opts, plan.key_groups, plan.result
    assert p is not None
    if not p.whole:
        return [None] * opts.to_tasks
    # a source contributes the keys of its own key groups only (as Flink clips a restored store to its
    # key-group range): what a file holds beyond them is another task's, or deleted there
    sources = [{**snap, "groups": list(task_range(i, opts.from_tasks, p.groups))}
               for i, snap in enumerate(plan.snapshots) if i in p.whole]
    keep = result.sources
    result.sources = [s for i, s in enumerate(keep) if i in p.whole]
    try:
        stores, manifest = build_targets(opts, sources, blobstore, work, result, progress)
        verify_targets(opts, stores, manifest, result)
    finally:
        result.sources = keep
    return list(stores)


def _plan_copies(p: KeyGroupPlan, indexes: list[Any]) -> tuple[list[list[LiveFile]], list[list[tuple[Any, str]]],
                                                              list[tuple[str, int]]]:
    """Per target, the files it copies: listed (LiveFiles) under the numbers 1.., and (renamed) their
    FileIndexes in the sources' snapshots with their names in the target's; and the (blob id, length) of
    every blob to copy, the targets' in turn."""
    from statectl.transfer.download import blob_ranges

    files_of = [dict(index.dir_index.walk_present()) for index in indexes]
    listed: list[list[LiveFile]] = []
    renamed: list[list[tuple[Any, str]]] = []
    jobs: list[tuple[str, int]] = []
    for t in p.targets:
        listed.append([])
        renamed.append([])
        for number, sf in enumerate(t.copies, start=1):
            listed[-1].append(dc_replace(sf.file, number=number))
            fi = files_of[sf.source][sf.file.name]
            renamed[-1].append((fi, f"{number:06d}.sst"))
            jobs += [(blob_id, length) for blob_id, _, length in blob_ranges(fi, f"file {sf.file.name}")]
    return listed, renamed, jobs


def _copy(opts: RescaleOptions, jobs: list[tuple[str, int]], blobstore: BlobStore, progress: ProgressReporter,
          cancel: Any, phases: dict[str, float]) -> list[str]:
    """Copy the blobs of ``jobs`` server-side (TTL'd), each checked as it lands (the targets' snapshots read
    back only what is uploaded for them), until ``cancel`` is set; their new ids in order. Each
    target owns copies, never the sources' blobs: a Samza job run on a target deletes the blobs of every file
    its next snapshot no longer lists (BlobStoreBackupManager.cleanUp, through BlobStoreUtil.cleanUpDir), which
    the source snapshots still need."""
    from statectl.transfer.copy import copy_blobs

    t0 = time.monotonic()
    new_ids = copy_blobs(jobs, blobstore, blobstore, True, ttl_seconds=opts.ttl_seconds,
                         parallelism=opts.parallelism, progress=progress, cancel=cancel, check=True) if jobs else []
    phases["copy_s"] = round(time.monotonic() - t0, 3)
    return new_ids


def _with_ids(renamed: list[list[tuple[Any, str]]], new_ids: list[str]) -> list[list[Any]]:
    """Per target, the FileIndexes of its copies: each source FileIndex under its new name and its blobs' new
    ids (``new_ids``: as _plan_copies listed the blobs)."""
    ids = iter(new_ids)
    return [[dc_replace(fi, file_name=name, blobs=tuple(dc_replace(b, blob_id=next(ids)) for b in fi.blobs))
             for fi, name in files] for files in renamed]


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


def _place_clips(p: KeyGroupPlan, written: list[tuple[Path, LiveFile]], outs: list[Path],
                 listed: list[list[LiveFile]]) -> int:
    """Move every target's range deletions (``written``: each target's in turn) into its dir after its
    ``listed`` files (appended), at level 0 with epochs above theirs: the newest files of the store. Both
    count: a read takes the newest file's range deletion over every older file's keys, compaction keeps a key
    whose sequence number is above the deletion's. Return the largest sequence number among them (0: none)."""
    it = iter(written)
    top = 0
    for t, out, files in zip(p.targets, outs, listed):
        epoch = max((f.epoch for f in files), default=0)
        for _ in t.clips:
            path, f = next(it)
            epoch += 1
            number = len(files) + 1
            os.rename(path, out / f"{number:06d}.sst")
            files.append(dc_replace(f, number=number, epoch=epoch))
            top = max(top, f.largest_seqno)
    return top
