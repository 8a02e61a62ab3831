"""What Samza's container start and commit delete in a logged store base dir, mirrored from its sources
(org.apache.samza.storage), to run over a state dir in tests:

- StorageManagerUtil.getTaskStoreDir: ``<base>/<store>/<task name, ' ' -> '_'>`` (a standby task's is its
  active's: ``Standby-X-n`` -> ``X``).
- StorageManagerUtil.getTaskStoreCheckpointDirs: every entry of ``<base>/<store>`` whose name *contains*
  ``<task dir> + "-"`` (files too: ``Files.list`` does not filter).
- TransactionalStateTaskRestoreManager.getStoreDirActions: the current dir is always deleted; each checkpoint
  dir is deleted, or (at most one, the newest valid) kept and restored into the current dir (hard links /
  copies), then deleted at the next commit. BlobStoreRestoreManager deletes the store dir and every
  checkpoint dir the same way before a restore.
- TaskStorageCommitManager.deleteOldCheckpointDirs: for *every* entry x of ``<base>`` (taken for a store dir),
  every entry of ``<base>/x`` matching the wildcard ``<task dir>-*`` that is not the latest checkpoint.
- ContainerStorageManager.clearLoggedStores: every entry of ``<base>`` (File.listFiles: dot entries too) removed
  when a container reads no checkpoint for any of its active tasks (a new job, a reset checkpoint topic, no
  checkpoint manager, every start of a standby-only container): :func:`clear_logged_stores`.
"""

from __future__ import annotations

import fnmatch
import shutil
from pathlib import Path


def task_store_dir(base: Path, store: str, task: str) -> Path:
    """StorageManagerUtil.getTaskStoreDir for an active task."""
    return base / store / task.replace(" ", "_")


def task_store_checkpoint_dirs(base: Path, store: str, task: str) -> list[Path]:
    """StorageManagerUtil.getTaskStoreCheckpointDirs: ``name.contains(taskStoreName + "-")``."""
    store_dir = base / store
    name = task_store_dir(base, store, task).name
    if not store_dir.exists():
        return []
    return [p for p in store_dir.iterdir() if f"{name}-" in p.name]


def old_checkpoint_dirs(base: Path, task: str, latest_checkpoint_id: str = "") -> list[Path]:
    """TaskStorageCommitManager.deleteOldCheckpointDirs: ``<base>/*/<task dir>-*``, all but the latest."""
    out = []
    if not base.exists():
        return out
    for store_dir in base.iterdir():
        if not store_dir.is_dir():
            continue
        pattern = task_store_dir(base, store_dir.name, task).name + "-*"
        for p in store_dir.iterdir():
            if fnmatch.fnmatchcase(p.name, pattern) and p.is_dir() and (
                    not latest_checkpoint_id or latest_checkpoint_id not in p.name):
                out.append(p)
    return out


def doomed(base: Path, stores: list[str], tasks: list[str]) -> list[Path]:
    """Every path an active start (restore) and commit of each task in ``tasks`` deletes or takes over, for
    the job's ``stores``: their current store dirs, their checkpoint dirs, old checkpoint dirs."""
    out: list[Path] = []
    for task in tasks:
        for store in stores:
            out.append(task_store_dir(base, store, task))
            out += task_store_checkpoint_dirs(base, store, task)
        out += old_checkpoint_dirs(base, task)
    return out


def restore_like_samza(base: Path, stores: list[str], tasks: list[str]) -> list[Path]:
    """Delete what a start of the active of each task would (TransactionalStateTaskRestoreManager with no
    valid checkpoint dir: the current dir and every checkpoint dir), and what its first commit's clean-up
    would (deleteOldCheckpointDirs). Return what was deleted."""
    gone = []
    for p in doomed(base, stores, tasks):
        if p.is_symlink() or p.is_file():
            p.unlink()
        elif p.is_dir():
            shutil.rmtree(p)
        else:
            continue
        gone.append(p)
    return gone


def clear_logged_stores(base: Path) -> list[Path]:
    """ContainerStorageManager.clearLoggedStores: ``FileUtil.rm`` of every entry ``File.listFiles`` gives for the
    logged store base dir (hidden ones included), the dir itself kept. Return what was deleted."""
    gone = []
    for p in sorted(base.iterdir()) if base.is_dir() else []:
        if p.is_symlink() or not p.is_dir():
            p.unlink()
        else:
            shutil.rmtree(p)
        gone.append(p)
    return gone
