"""Where a store lives locally (FORMATS.md "Local store directory"): store dirs, checkpoint dirs beside
them, and the files Samza or RocksDB keep there that are not part of a snapshot; the one mapping between a
task's name and its store dir's name, both ways; the task dirs found under a state dir."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from statectl.errors import UsageError
from statectl.formats.checkpoint_id import is_canonical_checkpoint_id

# Offset files Samza writes into store dirs; not part of a snapshot's identity (FORMATS.md).
OFFSET_FILES = frozenset({"OFFSET", "OFFSET-v2", "OFFSET-V2", "SIDE-INPUT-OFFSETS", "CHECKPOINT-V2", "CHECKPOINT-V1"})

# The mark backup leaves in a checkpoint dir it made (empty): proof that statectl may delete that dir
# later. Samza and other tools make checkpoint dirs of the same name (``<store>-<checkpointId>``), which
# Samza restores from at its next start: those are never statectl's to delete.
CHECKPOINT_MARK = ".statectl-checkpoint"

# Never uploaded: the LOCK file only means something to a running RocksDB; the mark is statectl's own.
NEVER_UPLOADED = frozenset({"LOCK", CHECKPOINT_MARK})

# In a live store dir but never in a RocksDB checkpoint: the info logs and the DB's identity file.
NOT_IN_CHECKPOINTS = frozenset({"LOCK", "LOG", "IDENTITY", CHECKPOINT_MARK})


def is_info_log(name: str) -> bool:
    """RocksDB's human-readable info logs (``LOG``, ``LOG.old.<ts>``), which checkpoints leave out."""
    return name == "LOG" or name.startswith("LOG.old.")


def not_in_checkpoint(store_dir: Path):
    """A predicate for the files of a live store dir that a RocksDB checkpoint of it would not hold: offset
    files, LOCK, IDENTITY, info logs, and every OPTIONS file but the newest (what ``diff`` and ``backup
    --dry-run`` leave out of a live store dir)."""
    skip = OFFSET_FILES | NOT_IN_CHECKPOINTS
    options = [n for n in os.listdir(store_dir) if n.startswith("OPTIONS-") and n[8:].isdigit()]
    newest = max(options, key=lambda n: int(n[8:]), default=None)
    return lambda n: n in skip or is_info_log(n) or (n.startswith("OPTIONS-") and n != newest)


def task_dir_name(task: str) -> str:
    """Samza's store sub-dir name for a task: spaces replaced by underscores (StorageManagerUtil.getTaskStoreDir:
    ``(storeName + File.separator + taskName).replace(' ', '_')``)."""
    return task.replace(" ", "_")


def tasks_of_dir(dir_name: str, tasks: Iterable[str]) -> list[str]:
    """The tasks of ``tasks`` whose store dir is named ``dir_name``, sorted. Samza writes both ``' '`` and
    ``'_'`` as ``'_'``, so a dir name with ``'_'`` can be the dir of several names (``a b``, ``a_b``): only
    names known from elsewhere (the job model, the checkpoint topic, earlier snapshots) tell which."""
    return sorted({t for t in tasks if task_dir_name(t) == dir_name})


def task_named_by_dir(dir_name: str) -> str | None:
    """The task a dir name alone names: the name itself when it has no ``'_'`` (Samza's rule changes nothing
    else); None when it has (see tasks_of_dir), or has a space (no task's dir has one)."""
    return None if "_" in dir_name or " " in dir_name else dir_name


def task_of_dir(dir_name: str, tasks: Iterable[str]) -> str | None:
    """The one task of ``tasks`` whose store dir is named ``dir_name``; None when no task or several have that
    dir (naming one then would be a guess)."""
    found = tasks_of_dir(dir_name, tasks)
    return found[0] if len(found) == 1 else None


# The longest name, in bytes, a command accepts: a path segment may have 255 (NAME_MAX), and statectl and
# Samza add to a name what the longest of them adds: a staged dir ``.<task dir>.statectl-restore-<pid>-<8 hex>``,
# a standby replica's ``Standby-<task>-<n>``, a checkpoint dir ``<task dir>-<checkpoint id>``. In a blob store a
# name is a key segment URL-quoted (catalog.records, catalog.pins, catalog.lease), and a ``file://`` store adds
# ``.json``, ``.lock`` and ``.tmp-`` marks to it: its quoted form gets at most MAX_QUOTED_NAME_BYTES.
MAX_NAME_BYTES = 200
MAX_QUOTED_NAME_BYTES = 235


def check_name(what: str, value: str) -> None:
    """Raise UsageError (exit 2) unless ``value`` can name one directory or blob key segment inside its
    parent: not empty or blank, no ``/``, not ``.`` or ``..``, no control character (NUL, newline, ESC,
    ...: a name that turns every later error line, log and listing into a trap), at most MAX_NAME_BYTES
    bytes in UTF-8 and MAX_QUOTED_NAME_BYTES URL-quoted. Every store, task and job name a command turns
    into a path goes through this (store_dir, catalog.refs.StoreRef), so no name reaches outside the
    state dir or the blob store prefix, and none fails later as a file name too long."""
    from urllib.parse import quote

    flag = f"--{what.replace(' ', '-')}"
    if not value:
        raise UsageError(f"{flag} is required")
    if not value.strip():
        raise UsageError(f"invalid {what} {value!r}: it is blank")
    if "\x00" in value or "/" in value or value in (".", ".."):
        raise UsageError(f"invalid {what} {value!r}: '/', NUL, '.' and '..' are not allowed")
    if not value.isprintable():
        raise UsageError(f"invalid {what} {value!r}: it contains a control character (a newline, tab, ESC, ...)",
                         hint=f"pass {flag} with printable characters only")
    size, quoted = len(value.encode("utf-8", "surrogatepass")), len(quote(value, safe=""))
    if size > MAX_NAME_BYTES or quoted > MAX_QUOTED_NAME_BYTES:
        raise UsageError(f"invalid {what} {value[:40]!r}... ({len(value)} characters): too long for a file name "
                         f"(at most {MAX_NAME_BYTES} bytes, {MAX_QUOTED_NAME_BYTES} once URL-quoted as blob keys "
                         f"spell it; this is {size} bytes, {quoted} quoted)")


def store_dir(state_dir: Path, store: str, task: str) -> Path:
    """``<state-dir>/<store>/<task with spaces -> _>``. Raises UsageError for a store or task name that
    is not one path segment (check_name)."""
    check_name("store", store)
    check_name("task", task)
    return Path(state_dir) / store / task_dir_name(task)


# statectl's standby root: replicas (``<root>/<n>/<store>/<task dir>``, replica n of a task, the active's layout
# below ``<n>``) with their lock and status files, the lock and status files of ``--layout active-path`` replicas,
# pre-restored checkpoint dirs (``<root>/prerestore/<store>/``) and failover journals (``<root>/failover/``).
# Never in the job's state dir: a container that reads no checkpoint for any of its active tasks (a new job, a
# reset checkpoint topic, no checkpoint manager, every start of a standby-only container) deletes every entry of
# the logged store base dir, dot dirs included (ContainerStorageManager.restoreStores -> clearLoggedStores:
# File.listFiles, then FileUtil.rm of each). By default a sibling of the state dir, ``<state dir>.statectl-standby``:
# on the same filesystem in nearly every deployment, so that promote's final rename into the state dir is
# atomic (check_standby_root checks it), and one per state dir (with LOGGED_STORE_BASE_DIR, Samza's state dir
# is ``$LOGGED_STORE_BASE_DIR/<job>-<job id>``: the sibling is another job's state dir never).
STANDBY_ROOT_SUFFIX = ".statectl-standby"
# Where older statectl versions kept the standby root: inside the state dir, which Samza clears (above).
OLD_STANDBY_ROOT = ".statectl-standby"


def standby_root(state_dir: Path, root: Path | str | None = None) -> Path:
    """The standby root of ``state_dir``: ``root`` when given (the ``standby_root`` setting), else the state dir's
    sibling ``<state dir>.statectl-standby`` (of its real path: a symlinked state dir's root sits beside its
    target, on its filesystem). Absolute; reads nothing but symlinks."""
    if root is not None:
        return Path(os.path.abspath(root))
    real = Path(os.path.realpath(state_dir))
    if real == real.parent:
        raise UsageError(f"the state dir {state_dir} is the filesystem root: it has no sibling to keep standby "
                         "replicas in", hint="pass --standby-root")
    return real.with_name(real.name + STANDBY_ROOT_SUFFIX)


def old_standby_root(state_dir: Path) -> Path:
    """``<state dir>/.statectl-standby``: the standby root of older statectl versions (OLD_STANDBY_ROOT)."""
    return Path(state_dir).absolute() / OLD_STANDBY_ROOT


def check_standby_root(state_dir: Path, root: Path) -> None:
    """Raise UsageError (exit 2) unless ``root`` can hold the standby replicas of ``state_dir``: not the state dir,
    not inside it (Samza clears it: STANDBY_ROOT_SUFFIX's note) and not holding it, and on the state dir's
    filesystem (their nearest existing dirs on one device), so that promote renames a replica into the state dir
    in one atomic step. Reads only."""
    real_state, real_root = Path(os.path.realpath(state_dir)), Path(os.path.realpath(root))
    if real_root == real_state or real_state in real_root.parents:
        raise UsageError(f"refusing standby root {root}: it is in the state dir {state_dir}, which a Samza container "
                         "clears whole when it starts without a checkpoint (a new job, a standby-only container)",
                         hint="leave --standby-root out (the default is beside the state dir), or name a dir "
                              "outside it on the same filesystem")
    if real_root in real_state.parents:
        raise UsageError(f"refusing standby root {root}: it holds the state dir {state_dir}",
                         hint="name a dir beside the state dir, on its filesystem")
    if device_of(real_root) != device_of(real_state):
        raise UsageError(f"refusing standby root {root}: it is on another filesystem than the state dir {state_dir}, "
                         "so a promote could not rename a replica into the state dir in one atomic step",
                         hint="pass --standby-root with a dir on the state dir's filesystem (the default is beside "
                              "the state dir)")


def device_of(path: Path | str) -> int:
    """The device (st_dev) of ``path``, or of its nearest existing parent. Raises OSError when not even ``/``
    can be stat'ed."""
    p = Path(os.path.abspath(path))
    while True:
        try:
            return os.stat(p).st_dev
        except (FileNotFoundError, NotADirectoryError):
            if p == p.parent:
                raise
            p = p.parent


def standby_replica_dir(state_dir: Path, store: str, task: str, replica: int, root: Path | str | None = None) -> Path:
    """``<standby root>/<replica>/<store>/<task with spaces -> _>``: where statectl keeps replica ``replica`` of a
    task's store, out of reach of Samza's clean-ups (STANDBY_ROOT_SUFFIX; ``root`` as standby_root). Raises
    UsageError for a negative replica number or a name store_dir refuses."""
    if replica < 0:
        raise UsageError(f"--replica must be 0 or more, not {replica}")
    return store_dir(standby_root(state_dir, root) / str(replica), store, task)


def samza_would_take(name: str, task_dir: str) -> bool:
    """Whether Samza's restore of the task whose store dir is named ``task_dir`` takes an entry ``name`` of
    its store's dir for one of its checkpoint dirs (StorageManagerUtil.getTaskStoreCheckpointDirs:
    ``name.contains(taskStoreName + "-")``), and so deletes it or moves it into the active dir
    (TransactionalStateTaskRestoreManager, BlobStoreRestoreManager)."""
    return f"{task_dir}-" in name


def checkpoint_dir(store: Path, checkpoint_id: str) -> Path:
    """``<storeDir>-<checkpointId>``."""
    return store.with_name(f"{store.name}-{checkpoint_id}")


def local_checkpoint_dirs(store: Path) -> dict[str, Path]:
    """The checkpoint dirs beside a store dir, by checkpoint id."""
    out: dict[str, Path] = {}
    parent = store.parent
    if not parent.is_dir():
        return out
    prefix = store.name + "-"
    for p in parent.iterdir():
        if p.name.startswith(prefix) and is_canonical_checkpoint_id(p.name[len(prefix):]) and p.is_dir():
            out[p.name[len(prefix):]] = p
    return out


# Files RocksDB or Samza write into a store dir: a task dir holding one of them but no CURRENT naming a
# MANIFEST is a damaged store (say so), not a foreign dir (skip it).
_STORE_FILE_PREFIXES = ("MANIFEST-", "OPTIONS-", "LOG.old.")
_STORE_FILE_SUFFIXES = (".sst", ".log", ".blob")
_STORE_FILES = OFFSET_FILES | {"CURRENT", "IDENTITY", "LOCK", "LOG"}


@dataclass(frozen=True)
class TaskDir:
    """A task's store dir ``<state-dir>/<store>/<name>``; ``damaged``: it holds RocksDB's or Samza's files
    but is not a RocksDB store (no CURRENT naming a MANIFEST)."""

    store: str
    name: str
    path: Path
    damaged: bool = False


def task_dirs(state_dir: Path, store: str | None = None) -> list[TaskDir]:
    """Every task dir under ``<state-dir>/<store>/<task dir>`` (only of ``store`` when given), sorted: RocksDB
    stores, and damaged ones. Left out: checkpoint dirs (``<task dir>-<checkpointId>``), dot dirs (statectl's
    standby root, staged restores, builds) and dirs with no store file at all. Reads only."""
    from statectl.rocks.store import is_store

    out = []
    stores = [state_dir / store] if store is not None else sorted(state_dir.iterdir())
    for store_path in stores:
        if store_path.name.startswith(".") or not store_path.is_dir():
            continue
        for path in sorted(store_path.iterdir()):
            tail = path.name.rsplit("-", 2)
            if (path.name.startswith(".") or not path.is_dir()
                    or (len(tail) == 3 and is_canonical_checkpoint_id(f"{tail[1]}-{tail[2]}"))):
                continue
            if is_store(path):
                out.append(TaskDir(store_path.name, path.name, path))
            elif _holds_store_files(path):
                out.append(TaskDir(store_path.name, path.name, path, damaged=True))
    return out


def _holds_store_files(path: Path) -> bool:
    try:
        names = [p.name for p in path.iterdir()]
    except OSError:
        return False
    return any(n in _STORE_FILES or n.startswith(_STORE_FILE_PREFIXES) or n.endswith(_STORE_FILE_SUFFIXES)
               for n in names)
