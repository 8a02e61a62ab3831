"""Where a replica may live, and moving one from where older statectl versions kept it.

Never in the job's state dir by default: a Samza container that reads no checkpoint for any of its active
tasks deletes every entry of the state dir (ContainerStorageManager.clearLoggedStores: a new job, a reset
checkpoint topic, no checkpoint manager, every start of a standby-only container), and the restore of a task
takes every entry of its store's dir whose name contains ``<task dir>-`` for one of its checkpoint dirs
(StorageManagerUtil.getTaskStoreCheckpointDirs) and deletes it, or hard-links it into the active dir
(TransactionalStateTaskRestoreManager, BlobStoreRestoreManager). The default replica dir is
``<standby root>/<n>/<store>/<task dir>`` (local.layout.standby_root, beside the state dir and on its
filesystem: check_standby_root), so promote's final move into the state dir is one atomic rename.

Older statectl versions kept a replica at ``<state>/<store>/Standby-<task dir>-<n>`` (legacy_standby_dir), then
in ``<state>/.statectl-standby`` (old_root_standby_dir): a replica found in either (its status file naming it) is
moved into the standby root by the next ``follow`` with the default dir, when no follower holds it
(relocate_legacy); ``status`` lists it with the command that moves it until then; ``promote`` takes it from any
of them (locate_replica).

``--layout active-path`` keeps the replica where Samza's own standby keeps it, the active's store dir
(getTaskStoreDir maps ``Standby-X-n`` to ``X``): a failover then needs no move at all, but the replica is in the
state dir, which a container of the job starting on this host without a checkpoint clears, so
check_active_path refuses it (DiscardedError) where the job's locality places such a container here. Only where
this host runs no active of the task, and only over a dir that is new, empty, statectl's, or a store whose
OFFSET-v2 names the same changelog partition (Samza's standby's); the lock and status files stay in the standby
root. Follow seeds, wipes and re-seeds only a replica dir that does not exist, is empty, or is statectl's
(check_replica_dir); never the task's active store dir, another store, a dir of plain files.
"""

from __future__ import annotations

import os
import socket
from dataclasses import replace
from pathlib import Path
from typing import Any

from statectl.catalog.refs import StoreRef
from statectl.engine.standby.nextstart import latest_checkpoints
from statectl.engine.standby.placement import active_name
from statectl.engine.standby.replica import (
    Replica,
    ReplicaLock,
    STATUS_SUFFIX,
    is_locked,
    made_by_follower,
    old_replica_dirs,
    old_root_standby_dir,
    read_status,
    write_status,
)
from statectl.errors import DiscardedError, LockHeldError, StatectlError, UsageError
from statectl.formats import jobconfig
from statectl.formats.offsets import OFFSET_V2, OffsetFileError, read_offsets
from statectl.fsutil import make_dirs, owner_of
from statectl.kafka.client import KafkaSecurity
from statectl.kafka.coordinator import CoordinatorStream, Locality
from statectl.local.layout import check_standby_root, device_of, samza_would_take, store_dir, task_dir_name
from statectl.local.staged import swap_into_place


def check_replica_dir(replica: Replica, state_dir: Path | None = None, *, active_path: bool = False) -> None:
    """Raise UsageError (exit 2) unless follow may seed, wipe and re-seed ``replica.replica_dir``: it does
    not exist, is empty, or statectl's follower made it (:func:`made_by_follower`). Refused whatever its
    content: the task's active store dir (with ``state_dir``; unless ``active_path``, where that is the
    replica dir and a store whose OFFSET-v2 names the replica's changelog partition, a Samza standby's, is
    adopted: see check_active_path for the rest), a symlink, a dir inside a RocksDB store, and a
    ``--replica-dir`` directly in the task's store's dir whose name (or its lock or status file's) Samza's
    restore of the task would take for a checkpoint dir (local.layout.samza_would_take). Reads only."""
    from statectl.rocks.store import is_store

    path = replica.replica_dir
    hint = ("follow into the standby dir (leave --replica-dir out), or a new or empty dir; a dir statectl's "
            "follower did not make is never wiped")
    if state_dir is not None:
        active = store_dir(state_dir, replica.ref.store, replica.ref.task)
        is_active = os.path.realpath(path) == os.path.realpath(active.absolute())
        if is_active and not active_path:
            raise UsageError(f"refusing to follow into {path}: it is the active store dir of task {replica.ref.task!r}",
                             hint=hint)
        task_dir = task_dir_name(replica.ref.task)
        exposed = [p.name for p in (path, replica.lock_path, replica.status_path)
                   if os.path.realpath(p.parent) == os.path.realpath(active.parent.absolute())
                   and samza_would_take(p.name, task_dir)]
        if exposed:
            moves = " (it moves a replica an older statectl kept there)" if made_by_follower(replica) else ""
            raise UsageError(f"refusing to follow into {path}: Samza's restore of task {replica.ref.task!r} deletes "
                             f"{exposed[0]} (its name contains '{task_dir}-')",
                             hint=f"leave --replica-dir out{moves}: the standby root, where Samza never looks; or "
                                  "pick a dir outside the store's dir")
        if is_active:
            if not os.path.lexists(path) or made_by_follower(replica) or _samza_standby_store(replica):
                return
    if path.is_symlink():
        raise UsageError(f"refusing to follow into {path}: it is a symlink (to {os.readlink(path)})",
                         hint="pass the dir it points to, if statectl's follower made it")
    for parent in Path(os.path.realpath(path)).parents:
        if is_store(parent):
            raise UsageError(f"refusing to follow into {path}: it is inside the RocksDB store {parent}", hint=hint)
    if not os.path.lexists(path) or made_by_follower(replica):
        return
    if not path.is_dir():
        raise UsageError(f"refusing to follow into {path}: it exists and is not a directory", hint=hint)
    if not any(path.iterdir()):
        return
    what = "a RocksDB store" if is_store(path) else "not empty"
    raise UsageError(f"refusing to follow into {path}: it is {what}, and statectl's follower did not make it "
                     f"(no {path.name}{STATUS_SUFFIX} beside it naming it)", hint=hint)


def _samza_standby_store(replica: Replica) -> bool:
    """Whether the replica dir is a RocksDB store whose OFFSET-v2 names the replica's changelog partition,
    and only it: what a Samza standby container leaves in the active's store dir (TaskSideInputStorageManager
    writes the standby's changelog offset there), which ``--layout active-path`` may adopt."""
    from statectl.rocks.store import is_store

    if not is_store(replica.replica_dir):
        return False
    try:
        return set(read_offsets(replica.replica_dir / OFFSET_V2)) == {replica.ssp}
    except (OSError, OffsetFileError):
        return False


def check_own_files(replica: Replica) -> None:
    """Raise UsageError (exit 2) when the replica's status file names another replica dir that exists: the
    lock and status files of a task's replica are one pair, whichever layout it has (the standby root's, or
    the active's store dir); following another dir would take them from it."""
    st = read_status(replica)
    if st is None or os.path.realpath(st.replica_dir) == os.path.realpath(replica.replica_dir):
        return
    if os.path.lexists(st.replica_dir):
        other = "the default layout" if replica.files_dir is not None else "--layout active-path"
        raise UsageError(f"refusing to follow into {replica.replica_dir}: this task's replica is at {st.replica_dir}",
                         hint=f"follow that one ({other}), or promote or delete it first")


def active_path_replica(replica: Replica, state_dir: Path) -> Replica:
    """``replica`` (in the standby root) kept instead in the task's active store dir, as a Samza standby
    keeps it (StorageManagerUtil.getTaskStoreDir maps ``Standby-X-n`` to ``X``); its lock and status files
    stay where ``replica``'s are, in the standby root."""
    active = store_dir(state_dir, replica.ref.store, replica.ref.task).absolute()
    return replace(replica, replica_dir=active, files_dir=replica.lock_path.parent)


def check_active_path(replica: Replica, bootstrap: str | None, *, security: KafkaSecurity | None = None,
                      in_state_dir: bool = True) -> None:
    """Raise UsageError (exit 2, one line) unless this host runs no active of the replica's task, so that
    the active's store dir may hold its replica (``--layout active-path``): the store's RocksDB LOCK is not
    held (but by this replica's own follower, which the replica's lock then says: follow exits 11), and,
    when the job's coordinator stream is on ``bootstrap``, its locality does not place the task's
    container on this host. DiscardedError (exit 14) when the locality places here a container whose next
    start clears the state dir, the replica with it (wipes_state_dir; not checked without ``in_state_dir``: a
    pre-restore, kept in the standby root). Reads only; errors reading the stream as kafka.client says."""
    from statectl.rocks.store import lock_holder as store_lock_holder

    task = replica.ref.task
    hint = "follow into the standby root (leave --layout out), or on a host that runs no active of this task"
    pid = store_lock_holder(replica.replica_dir)
    if pid is not None and not is_locked(replica.lock_path):
        who = f"process {pid}" if pid > 0 else "another process"
        raise UsageError(f"refusing --layout active-path: the store {replica.replica_dir} is held by {who}, so this "
                         f"host runs the active of task {task!r}", hint=hint)
    if bootstrap is None:
        return
    with CoordinatorStream(bootstrap, replica.ref.job, replica.ref.job_id, security=security) as cs:
        if not cs.refresh():
            return
        loc = cs.locality()
        config = cs.config()
    container = loc.task_containers.get(task)
    host = loc.container_hosts.get(container) if container is not None else None
    here = {socket.gethostname(), socket.getfqdn()}
    if host and host in here:
        raise UsageError(f"refusing --layout active-path: the job's locality places the container {container} of "
                         f"task {task!r} on this host ({host})", hint=hint)
    placed = sorted(c for c, h in loc.container_hosts.items() if h and h in here)
    why = wipes_state_dir(placed, loc, config, bootstrap, replica.ref, security) if placed and in_state_dir else None
    if why is not None:
        raise DiscardedError(f"refusing --layout active-path: {why}, deleting every entry of the state dir, "
                             f"{replica.replica_dir} among them", hint=hint)


def wipes_state_dir(containers: list[str], loc: Locality, config: dict[str, str], bootstrap: str, ref: StoreRef,
                    security: KafkaSecurity | None) -> str | None:
    """Why the next start of one of ``containers`` (of job ``ref``'s, per its locality ``loc``) deletes every entry
    of the state dir, or None when none does: a container reads checkpoints only for its active tasks, and one
    that reads none clears the logged store base dir (ContainerStorageManager.restoreStores -> clearLoggedStores):
    a container of standby tasks only, a job without a checkpoint manager (``task.checkpoint.factory``), or no
    checkpoint the job reads (KafkaCheckpointLog.read_checkpoints, ``task.checkpoint.read.versions``) for any of
    its active tasks. Reads the checkpoint topic only when needed."""
    checkpoints: dict[str, Any] | None = None
    for container in containers:
        tasks = sorted(t for t, c in loc.task_containers.items() if c == container)
        actives = [t for t in tasks if active_name(t, loc.task_modes) == t]
        if tasks and not actives:
            return (f"the job's locality places its standby container {container} on this host, and each start of "
                    "a container without active tasks reads no checkpoint and clears the state dir")
        if not actives:
            continue
        if config and not jobconfig.has_checkpoint_manager(config):
            return (f"the job's locality places its container {container} on this host, and the job has no "
                    f"checkpoint manager ({jobconfig.CHECKPOINT_FACTORY}), so each of its starts clears the state dir")
        if checkpoints is None:
            checkpoints = latest_checkpoints(bootstrap, ref, security, config=config)
        if not any(t in checkpoints for t in actives):
            return (f"the job's locality places its container {container} on this host, and the job's checkpoints "
                    f"name none of its active tasks ({jobconfig.CHECKPOINT_READ_VERSIONS}: "
                    f"{','.join(map(str, jobconfig.checkpoint_read_versions(config)))}), so its next start clears "
                    "the state dir")
    return None


def old_replica(replica: Replica, state_dir: Path, number: int = 0) -> tuple[Path, Path | None] | None:
    """Where an older statectl kept ``replica`` (replica ``number`` of its task; in the standby root, or from
    active_path_replica) by default, for relocate_legacy: (its dir, the dir of its lock and status files when not
    beside it), the first of old_replica_dirs whose status file is there; for an active-path replica, its files
    in the old standby root. None when there is none. Reads only."""
    ref = replica.ref
    if replica.files_dir is not None:  # --layout active-path: only its lock and status files ever moved
        files = old_root_standby_dir(state_dir, ref.store, ref.task, number).parent.absolute()
        found = replace(replica, files_dir=files)
        return (replica.replica_dir, files) if read_status(found) is not None else None
    for path in old_replica_dirs(state_dir, ref.store, ref.task, number):
        if read_status(replace(replica, replica_dir=path, files_dir=None)) is not None:
            return path, None
    return None


def relocate_legacy(replica: Replica, legacy_dir: Path, legacy_files: Path | None = None) -> str | None:
    """Move the replica an older statectl kept at ``legacy_dir`` (old_replica_dirs, where Samza deletes it) into
    ``replica.replica_dir``, with its status file, and return a note saying so; None when there is none to move.
    ``legacy_files``: where that replica's lock and status files are when not beside it (an ``--layout
    active-path`` replica's, in an old standby root: only they move, the replica being the active dir itself).
    Only a dir a follower made (made_by_follower), only when no follower holds it, and only into a place that
    does not exist or is an empty dir (else it is left, with a note). The status file naming the new place is
    written first, then the dir is renamed in one step (local.staged.swap_into_place): a kill at any point leaves
    either place whole, and the next call finishes the move. Call it holding ``replica``'s lock. Raises
    LockHeldError (exit 11) when a follower holds the old replica; StatectlError when the rename fails."""
    old = replace(replica, replica_dir=Path(legacy_dir).absolute(), files_dir=legacy_files)
    target = replica.replica_dir
    files_only = os.path.realpath(old.replica_dir) == os.path.realpath(target)
    if not os.path.lexists(old.replica_dir):
        st = read_status(old)  # a move killed after its rename: the old status file names a dir now gone
        if st is not None and made_by_follower(replica) and not is_locked(old.lock_path):
            old.status_path.unlink(missing_ok=True)
            old.lock_path.unlink(missing_ok=True)
        return None
    if old.replica_dir.is_symlink() or not old.replica_dir.is_dir() or not made_by_follower(old):
        return None  # not statectl's: never touched
    if not files_only and os.path.lexists(target) and (target.is_symlink() or not target.is_dir()
                                                       or any(target.iterdir())):
        return (f"a replica an older statectl kept at {old.replica_dir} is left there (Samza deletes it there): a "
                f"replica is already at {target}; delete the old one once it is not needed")
    try:
        held = ReplicaLock(old)
    except LockHeldError as e:
        raise LockHeldError(f"{e}: it is the replica an older statectl kept where Samza deletes it, to be "
                            f"moved to {target}", hint="stop that follower, then follow again: the replica is moved "
                                                       "with its data and offset") from None
    with held:
        st = read_status(old)
        if st is None:
            return None
        st.replica_dir = str(target)
        write_status(replica, st)  # first: the new place is statectl's before anything is in it
        if not files_only:
            _move_replica_dir(old.replica_dir, target)
        old.status_path.unlink(missing_ok=True)
        old.lock_path.unlink(missing_ok=True)
    if files_only:
        return f"moved the lock and status files of the replica {target} to {replica.status_path.parent}"
    return (f"moved the replica from {old.replica_dir} (where Samza deletes it) to {target}, with its data "
            "and offset")


def _move_replica_dir(source: Path, target: Path) -> None:
    """Rename a replica dir to ``target`` (an empty dir there replaced), its parent made as needed."""
    try:
        make_dirs(target.parent, owner_of(source))
        if os.path.lexists(target):
            target.rmdir()  # empty: the rename then replaces nothing
        swap_into_place(source, target)
    except OSError as e:
        raise StatectlError(f"moving the replica {source} to {target} failed: {e}; it is where it was",
                            hint="fix that (the standby root must be on the state dir's filesystem), then follow "
                                 "again") from e


def locate_replica(replica: Replica, state_dir: Path, number: int = 0) -> tuple[Replica, str | None]:
    """The replica promote takes when no dir was given (``replica`` is the default, replica ``number`` in
    the standby root): the one the status file there names when it is the task's active store dir (a
    follower with ``--layout active-path`` made it); else ``replica`` when its dir exists; else one an older
    statectl kept (old_replica_dirs; an active-path replica whose files are in the old standby root), with a
    note; else ``replica`` (promote says there is none). Reads only."""
    in_place = active_path_replica(replica, state_dir)
    for files in (replica.lock_path.parent, old_root_standby_dir(state_dir, replica.ref.store, replica.ref.task,
                                                                  number).parent.absolute()):
        candidate = replace(in_place, files_dir=files)
        st = read_status(candidate)
        if st is not None and os.path.realpath(st.replica_dir) == os.path.realpath(in_place.replica_dir) \
                and made_by_follower(candidate):
            return candidate, None if files == in_place.files_dir else (
                f"promoting the replica {candidate.replica_dir} whose lock and status files an older statectl keeps "
                f"in {files}")
    if os.path.lexists(replica.replica_dir):
        return replica, None
    for old_dir in old_replica_dirs(state_dir, replica.ref.store, replica.ref.task, number):
        legacy = replace(replica, replica_dir=old_dir, files_dir=None)
        if made_by_follower(legacy):
            return legacy, (f"promoting the replica an older statectl kept at {legacy.replica_dir} (a following "
                            f"'statectl standby follow' would have moved it to {replica.replica_dir})")
    return replica, None


def check_follow_dirs(replica: Replica, bootstrap: str, *, security: KafkaSecurity | None = None,
                      state_dir: Path | None = None, root: Path | None = None, active_path: bool = False) -> None:
    """Raise unless follow may seed, wipe and re-seed ``replica`` where it is: UsageError (exit 2) for a replica
    dir it may not touch (check_replica_dir; ``state_dir``: the job's state dir, whose active store dir of the
    task is never a replica, unless ``active_path``: ``replica`` from active_path_replica, check_active_path
    must pass), a standby root ``root`` in the state dir or on another filesystem (check_placement_dirs), or a
    status file naming another replica of the task that exists (check_own_files); DiscardedError (exit 14) for
    ``active_path`` where a container of the job starting on this host clears the state dir. Reads only."""
    check_replica_dir(replica, state_dir, active_path=active_path)
    if state_dir is not None:
        check_placement_dirs(replica, state_dir, root)
    check_own_files(replica)
    if active_path:
        check_active_path(replica, bootstrap, security=security)


def check_placement_dirs(replica: Replica, state_dir: Path, root: Path | None) -> None:
    """Raise UsageError (exit 2) unless ``root`` (when given: the replica is in it) may be the standby root of
    ``state_dir`` (local.layout.check_standby_root: outside it, on its filesystem, where promote's rename into the
    state dir is atomic). An explicit replica dir elsewhere is the caller's: promote checks it
    (check_same_filesystem). Reads only."""
    if root is not None:
        check_standby_root(state_dir, root)


def check_same_filesystem(replica: Replica, target: Path) -> None:
    """Raise UsageError (exit 2) unless the replica dir and the dir promote renames it to (``target``, or its
    nearest existing parent) are on one filesystem: a rename across filesystems is a copy, not one atomic step.
    Reads only."""
    if device_of(replica.replica_dir) != device_of(target):
        raise UsageError(f"refusing to promote {replica.replica_dir} to {target}: they are on different filesystems, "
                         "so it cannot be renamed there in one atomic step",
                         hint="follow into a replica dir on the state dir's filesystem (leave --replica-dir out; "
                              "--standby-root on that filesystem), then promote")
