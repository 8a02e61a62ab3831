"""Stopping a replica's follower for a promote (the fence), and starting it again when the promote fails.

Only a follower on this host is stopped (SIGTERM, then wait until its lock is free), never a promote holding the
replica. A promote that fails after the fence starts the follower again from the settings its status file
records (engine.standby.follower), checked against the replica, and says whether it came back.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

from statectl.engine.standby.follower import FollowerSettings, restart as restart_process
from statectl.engine.standby.replica import FollowStatus, PROMOTER, Replica, holder_of, is_locked, lock_holder
from statectl.errors import LockHeldError, StatectlError, command
from statectl.fsutil import process_alive
from statectl.local.layout import standby_root


FENCE_TIMEOUT_S = 60.0


def follower_to_fence(replica: Replica) -> int | None:
    """The pid of the follower :func:`fence` stops (None: none runs). Raises LockHeldError (exit 11) when the
    replica's lock is held by a promote, or by a follower this host cannot stop (on another host, gone, or
    this process). Reads only."""
    if not is_locked(replica.lock_path):
        return None
    pid, host, role = holder_of(replica.lock_path)
    if role == PROMOTER:
        raise LockHeldError(f"replica {replica.replica_dir} is being promoted by pid {pid} on {host}",
                            hint=("let that promote end, then see ", command("standby status")))
    if pid is None or host != socket.gethostname() or pid == os.getpid() or not process_alive(pid):
        raise LockHeldError(f"replica {replica.replica_dir} is held by a follower this host cannot stop "
                            f"(pid {pid} on {host})", hint="stop that follower, then promote again")
    return pid


def fence(replica: Replica) -> bool:
    """Stop the replica's follower on this host (SIGTERM) and wait until it has; True if one was running.
    Only a follower (:func:`follower_to_fence`), never a promote that holds the replica."""
    pid = follower_to_fence(replica)
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + FENCE_TIMEOUT_S
    while process_alive(pid):
        if time.monotonic() > deadline:
            raise StatectlError(f"the follower of {replica.replica_dir} (pid {pid}) did not stop within "
                                f"{FENCE_TIMEOUT_S:g}s", hint="stop it yourself, then promote again")
        time.sleep(0.05)
    return True


def restart_fenced(replica: Replica, status: FollowStatus | None, bootstrap: str) -> str:
    """Start the follower a failed promote fenced again, from the settings its status file records, checked
    against the replica (follower.restart); return the sentence that says whether it came back, or
    the command that starts it (built from the replica's own fields when the file records none that fit)."""
    settings = status.follower if status is not None else None
    why = "its status file records no settings" if settings is None else _not_its(settings, replica)
    if settings is None or why is not None:
        ref = replica.ref
        where: dict[str, Any] = (
            {"pre_restore": True, "state_dir": str(replica.replica_dir.parents[1]),  # prerestore_replica's anchor
             "standby_root": str(replica.files_dir.parents[1]) if replica.files_dir is not None else None}
            if status is not None and status.layout == "pre-restored" else
            {"changelog": f"{replica.system}.{replica.changelog}", "partition": replica.partition,
             "replica_dir": str(replica.replica_dir)})
        command = FollowerSettings(bootstrap, ref.job, ref.job_id, task=ref.task, store=ref.store, **where).command()
        return f"its follower was stopped and is not started again ({why}): start it with: {command}"

    def following(pid: int) -> bool:
        return is_locked(replica.lock_path) and lock_holder(replica) == (pid, socket.gethostname())

    return restart_process(settings, cwd=replica.lock_path.parent, log=replica.log_path, following=following)


def _not_its(settings: FollowerSettings, replica: Replica) -> str | None:
    """Why ``settings`` do not start ``replica``'s follower (None: they do): they must name its job, task (or
    a container), store and changelog partition, and its dir (or the state dir it is in)."""
    ref = replica.ref
    if (settings.job, settings.job_id) != (ref.job, ref.job_id) or settings.store not in (None, ref.store) or (
            settings.store is None and settings.container is None):
        return "its settings name another job or store"
    if settings.container is None and settings.task != ref.task:
        return "its settings name another task"
    if settings.changelog is not None and (settings.changelog, settings.partition) != (
            f"{replica.system}.{replica.changelog}", replica.partition):
        return "its settings name another changelog partition"
    where = os.path.realpath(replica.replica_dir)
    if settings.replica_dir is not None:
        return None if os.path.realpath(settings.replica_dir) == where else "its settings name another replica dir"
    if settings.state_dir is None:
        return "its settings name no state dir"
    # In its state dir (--layout active-path, a pre-restore's anchor) or in the standby root its settings give.
    homes = (settings.state_dir, standby_root(Path(settings.state_dir), settings.standby_root))
    if not any(where.startswith(os.path.realpath(home) + os.sep) for home in homes):
        return "its settings name another state dir"
    return None
