"""restore: rebuild a store from a snapshot (docs/ARCHITECTURE.md).

The store is built in a temporary sibling dir — identical local files hard-linked (immutable SSTs)
or copied, the rest downloaded in parallel and verified (size + CRC32) — and then swapped into place
atomically. The live dir is never half-written; the old store is deleted only after the new one is
complete and in place. Any failure removes the temporary dir and leaves the target as it was.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat as stat_mod
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from statectl import defaults, failpoints
from statectl.blobstore.base import BlobStore
from statectl.catalog.index import snapshot_owner
from statectl.catalog.pins import ReaderPin
from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.refs import StoreRef
from statectl.catalog.resolve import ResolvedSnapshot, resolve_snapshot
from statectl.errors import DiskFullError, UsageError
from statectl.local.layout import checkpoint_dir, local_checkpoint_dirs
from statectl.local.staged import StagedStore, check_free_space, check_target, note_if_linked, resolve_target
from statectl.parallel import check_parallelism
from statectl.progress import NoteRecorder, ProgressReporter
from statectl.ratelimit import RateLimit
from statectl.snapshot.diff import LocalFile, group_name, owner_name, same_local_file
from statectl.snapshot.model import FileIndex
from statectl.transfer.download import DownloadItem, blob_ranges, download_files, range_size_for
from statectl.transfer.verify import require_blobs

DEFAULT_RANGE_SIZE = 16 * 1024 * 1024

IMMUTABLE_SUFFIXES = (".sst", ".blob")

@dataclass(frozen=True)
class RestoreOptions:
    """What to restore where. ``target_dir`` defaults to the store dir; ``force`` allows replacing a
    non-empty target that is not a RocksDB store (never one that holds a store, the blob store or a
    mount point); ``state_dir`` (when known) protects the job's other stores from being replaced; ``from_other_store`` allows ``snapshot`` to name a snapshot of another job, task or
    store (a deliberate cross-restore). ``range_size``: the smallest ranged GET a large file is split into
    (transfer.download.range_size_for: only files larger than a quarter of an even share of the download per slot
    are)."""

    ref: StoreRef
    store_dir: Path
    target_dir: Path | None = None
    snapshot: str | None = None
    parallelism: int = defaults.PARALLELISM
    range_size: int = DEFAULT_RANGE_SIZE
    force: bool = False
    from_other_store: bool = False
    state_dir: Path | None = None  # the job's state base dir, when known: its other stores are never replaced
    rate_limit: RateLimit | None = None  # the bucket every byte downloaded is taken from (Session.rate_limit)

    def validate(self) -> None:
        check_parallelism(self.parallelism)
        if self.range_size < 1024 * 1024:
            raise UsageError("range size must be at least 1MiB")

@dataclass
class RestoreResult:
    snapshot_id: str
    checkpoint_id: str
    target_dir: str
    files_total: int
    files_downloaded: int
    files_reused: int
    bytes_total: int
    bytes_downloaded: int
    duration_s: float
    notes: list[str] = field(default_factory=list)
    blobstore: str = ""  # the blob store's URL (printed with its secrets masked)
    store: str = ""  # the store and task restored (restore --all: which one this result is of)
    task: str = ""

@dataclass(frozen=True)
class PlannedFile:
    """One file of a restore plan: ``download`` it from the blob store, or ``reuse`` the identical local
    file ``source`` (hard-linked when immutable, else copied)."""

    path: str
    size: int
    action: str  # "download" | "reuse"
    source: str | None = None


@dataclass
class RestorePlan:
    """What a restore will do, decided from the snapshot's index and the local files, with nothing
    written: which snapshot, where, and for each file whether it is downloaded or reused. The counts
    carry the names of RestoreResult's; ``restore`` executes exactly this plan (``restore --dry-run``
    prints it). ``snapshot``: the resolved snapshot the plan was made from (not part of the JSON)."""

    snapshot_id: str
    checkpoint_id: str
    target_dir: str
    files_total: int
    files_downloaded: int
    files_reused: int
    bytes_total: int
    bytes_downloaded: int
    files: list[PlannedFile]
    dry_run: bool = True
    notes: list[str] = field(default_factory=list)
    snapshot: ResolvedSnapshot | None = field(default=None, repr=False, metadata={"internal": True})
    store: str = ""
    task: str = ""


def plan_restore(opts: RestoreOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
                 progress: ProgressReporter | None = None) -> RestorePlan:
    """The plan of ``restore(opts)``, writing nothing anywhere: no reader pin, no temporary dir. Raises what
    ``restore`` raises before it writes (unknown snapshot, a refused target, a damaged index, blobs whose
    sizes do not tile a file, too little free space), and what it would raise downloading: a blob missing
    or of another size (every blob to download is stat'ed). Idempotent. A restore run later may reuse more or
    fewer local files if the store dir changed meanwhile."""
    progress, target = _checked(opts, blobstore, progress)
    snap = resolve_snapshot(blobstore, checkpoints, opts.ref, opts.snapshot, allow_other_store=opts.from_other_store)
    plan = _plan(opts, target, snap, blobstore, progress, dry_run=True)
    plan.notes = progress.notes
    return plan


def restore(opts: RestoreOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
            progress: ProgressReporter | None = None) -> RestoreResult:
    """Restore a snapshot of ``opts.ref``; return what was downloaded and reused.

    Raises SnapshotNotFoundError (exit 10) for an unknown snapshot; LockHeldError (11) when the
    target store is held by a running process; CorruptSnapshotError subclasses for a malformed index,
    unsafe names, missing, short, long or damaged blobs; DiskFullError when the disk fills. In every
    error case the target dir is left exactly as it was.

    The snapshot is pinned while it is read (catalog.pins): retention and gc keep its blobs meanwhile.
    With credentials that cannot write the pin, it is read unpinned and a note says so. The pin is written
    and checked while the plan is made and the downloads begin (ReaderPin.read); the new store is swapped
    in only once the check kept the snapshot. The work done is the plan ``plan_restore`` computes,
    executed as it is.
    """
    with ReaderPin(blobstore, checkpoints, opts.ref, operation="restore") as pin:
        started = time.monotonic()
        progress, target = _checked(opts, blobstore, progress)
        # A restore only reads the blob store (but for its pin): an interrupted cleanup is finished by the
        # next backup or gc, which hold the store's lease (and a restore may run with read-only credentials).
        pin.progress = progress  # a note that no pin could be written goes into the result

        def read(snap: ResolvedSnapshot, confirm: Callable[[], None]) -> RestoreResult:
            def before_swap() -> None:
                confirm()
                failpoints.hit("before-swap")
                pin.release_soon()  # every byte is here: the pin's delete overlaps the swap

            plan = _plan(opts, target, snap, blobstore, progress)
            return execute_restore(plan, blobstore, opts, progress, started=started, before_swap=before_swap)

        return pin.read(opts.snapshot, read, allow_other_store=opts.from_other_store)


def _checked(opts: RestoreOptions, blobstore: BlobStore,
             progress: ProgressReporter | None) -> tuple[NoteRecorder, Path]:
    """The checks restore and plan_restore make before they read the snapshot: the options, then the target
    (_checked_target). Returns the NoteRecorder their notes go into, and the resolved target."""
    opts.validate()
    recorder = NoteRecorder(progress)
    return recorder, _checked_target(opts, blobstore, recorder)


def _checked_target(opts: RestoreOptions, blobstore: BlobStore, progress: ProgressReporter) -> Path:
    asked = Path(opts.target_dir or opts.store_dir)
    target = resolve_target(asked)
    check_target(target, opts.force, blob_root=getattr(blobstore, "root", None), own_store=opts.store_dir,
                 state_dir=opts.state_dir)
    note_if_linked(asked, target, progress)
    return target


def _plan(opts: RestoreOptions, target: Path, snap: ResolvedSnapshot, blobstore: BlobStore,
          progress: ProgressReporter, *, dry_run: bool = False) -> RestorePlan:
    index = snap.index
    checkpoint_id = index.snapshot_metadata.checkpoint_id
    if snapshot_owner(index) != str(opts.ref):
        progress.note(f"restoring a snapshot of {snapshot_owner(index)} into {target} (--from-other-store)")
    files = list(index.dir_index.walk_present())
    for rel, fi in files:
        blob_ranges(fi, f"file {rel}")  # every file's blobs tile it, reused or not
    sources = _reuse_sources(opts.store_dir.absolute(), target, checkpoint_id)
    local = {rel: src for rel, fi in files if (src := _local_copy(sources, rel, fi)) is not None}
    to_fetch = [(rel, fi) for rel, fi in files if rel not in local]
    # Before touching the disk: the blobs of every file larger than one download range (which a restore
    # preallocates: a size no blob backs, 10**15 bytes, is refused here, not on a full disk); smaller files
    # show a missing or wrong blob as they download. A dry run stats every blob: it downloads none.
    range_size = range_size_for(opts.range_size, opts.parallelism, sum(fi.size for _, fi in to_fetch))
    require_blobs(blobstore, to_fetch, opts.parallelism, larger_than=0 if dry_run else range_size)
    check_free_space(target, sum(fi.size for _, fi in to_fetch))
    planned = [PlannedFile(rel, fi.size, "reuse", str(local[rel])) if rel in local
               else PlannedFile(rel, fi.size, "download") for rel, fi in files]
    return RestorePlan(
        snapshot_id=snap.index_blob_id, checkpoint_id=checkpoint_id, target_dir=str(target),
        files_total=len(files), files_downloaded=len(to_fetch), files_reused=len(local),
        bytes_total=sum(fi.size for _, fi in files), bytes_downloaded=sum(fi.size for _, fi in to_fetch),
        files=planned, snapshot=snap, store=opts.ref.store, task=opts.ref.task)


def execute_restore(plan: RestorePlan, blobstore: BlobStore, opts: RestoreOptions,
                    progress: ProgressReporter | None = None, *, started: float | None = None,
                    before_swap: Callable[[], None] | None = None) -> RestoreResult:
    """Carry out ``plan``: build the store aside from exactly its files (each downloaded or reused as
    planned) and swap it into ``plan.target_dir``. Raises what ``restore`` raises; a local file planned for
    reuse that is gone meanwhile fails the restore (the target untouched): plan again. ``before_swap``:
    called once the store is built aside; what it raises fails the restore, the target untouched."""
    progress = progress if isinstance(progress, NoteRecorder) else NoteRecorder(progress)
    started = time.monotonic() if started is None else started
    if plan.snapshot is None:
        raise UsageError("execute_restore takes a plan made by plan_restore (it carries the snapshot's index)")
    index = plan.snapshot.index
    target = Path(plan.target_dir)
    by_path = dict(index.dir_index.walk_present())
    files = [(f, by_path[f.path]) for f in plan.files]
    downloaded_bytes = 0
    with StagedStore(target, what="restore", disk_full=lambda: _disk_full(target, list(by_path.items())),
                     sync="dirs") as staged:
        tmp = staged.path
        for rel_dir in index.dir_index.present_dirs():
            (tmp / rel_dir).mkdir()
        for f, fi in files:
            if f.action == "reuse":
                _reuse(Path(f.source), fi, tmp / f.path, staged.owner)
        to_download = [DownloadItem(f.path, tmp / f.path, fi) for f, fi in files if f.action == "download"]
        range_size = range_size_for(opts.range_size, opts.parallelism, sum(i.index.size for i in to_download))
        downloaded_bytes = download_files(blobstore, to_download, parallelism=opts.parallelism,
                                          range_size=range_size, progress=progress, limit=opts.rate_limit)
        if before_swap is not None:
            before_swap()
        staged.commit()  # the downloads and copies fsynced their files: "dirs" is enough
    for note in staged.notes:
        progress.note(note)
    _note_other_owners(target, by_path, progress)

    return RestoreResult(
        snapshot_id=plan.snapshot_id,
        checkpoint_id=plan.checkpoint_id,
        target_dir=plan.target_dir,
        files_total=plan.files_total,
        files_downloaded=plan.files_downloaded,
        files_reused=plan.files_reused,
        bytes_total=plan.bytes_total,
        bytes_downloaded=downloaded_bytes,
        duration_s=round(time.monotonic() - started, 3),
        notes=progress.notes,
        blobstore=blobstore.url,
        store=opts.ref.store,
        task=opts.ref.task,
    )

def _disk_full(target: Path, files: list[tuple[str, FileIndex]]) -> DiskFullError:
    need = sum(fi.size for _, fi in files)
    return DiskFullError(f"no space left on device restoring into {target}; the old store is untouched",
                         hint=f"the snapshot needs up to {need} bytes free in {target.parent}; free some space, "
                              "or restore elsewhere with --target-dir")

def _reuse_sources(store_dir: Path, target: Path, checkpoint_id: str) -> list[Path]:
    """Local dirs whose identical files can stand in for downloads, best first: the checkpoint dir
    of this very snapshot, the target and store dirs, then the other local checkpoint dirs."""
    out = [checkpoint_dir(store_dir, checkpoint_id), target, store_dir]
    out += sorted(local_checkpoint_dirs(store_dir).values(), reverse=True)
    seen, uniq = set(), []
    for p in out:
        if p not in seen and p.is_dir():
            seen.add(p)
            uniq.append(p)
    return uniq

def _local_copy(sources: list[Path], rel: str, fi: FileIndex) -> Path | None:
    """The first local file identical to ``fi`` (Samza's same-file rule) among ``sources``, or None."""
    for src_dir in sources:
        src = src_dir / rel
        try:
            st = src.lstat()
        except (FileNotFoundError, NotADirectoryError):
            continue
        if stat_mod.S_ISREG(st.st_mode) and same_local_file(LocalFile.from_stat(src, st), fi):
            return src
    return None

def _note_other_owners(target: Path, files: dict[str, FileIndex], progress: ProgressReporter) -> None:
    """Say so when the snapshot records other owners than the restored store's files have (a backup run as
    root by an older statectl recorded root for the files its checkpoint made; a restore into another
    user's dir): Samza's restore compares them (DirDiffUtil.areSameFile, blob.store.compare.file.owners.
    on.restore) and fails on a difference."""
    st = target.stat()
    have = (owner_name(st.st_uid), group_name(st.st_gid))
    other = [(rel, fi.file_metadata) for rel, fi in files.items()
             if (fi.file_metadata.owner, fi.file_metadata.group) != have]
    if other:
        rel, m = other[0]
        progress.note(f"the snapshot records another owner than the restored files' ({':'.join(have)}) for "
                      f"{len(other)} of its {len(files)} files, e.g. {rel} ({m.owner}:{m.group}): a job running as "
                      f"{have[0]} fails Samza's owner check restoring it; a new backup of the store records the "
                      "owners its files have")


def _reuse(src: Path, fi: FileIndex, dest: Path, owner: tuple[int, int] | None) -> None:
    """Hard-link (immutable files: their data is on disk already) or copy and fsync (the rest) ``src``. Run
    as root, only a file of ``owner`` is linked: the new store's files are given to it, and a link shares
    its owner with the file it links."""
    if fi.file_name.endswith(IMMUTABLE_SUFFIXES) and (os.geteuid() != 0 or _owner(src) == owner):
        try:
            os.link(src, dest)
            return
        except OSError as e:
            if e.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
                raise
    shutil.copyfile(src, dest)
    fd = os.open(dest, os.O_WRONLY)
    try:
        os.fchmod(fd, fi.file_metadata.mode)
        os.fsync(fd)
    finally:
        os.close(fd)


def _owner(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_uid, st.st_gid
