"""standby status: the replicas of a state dir, from their status files, as their followers last reported.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statectl.engine.standby.replica import FollowStatus, LOCK_SUFFIX, STATUS_SUFFIX, is_locked, status_from_json
from statectl.errors import NotFoundError
from statectl.formats.offsets import OFFSET_V2
from statectl.fsutil import process_alive
from statectl.local.layout import old_standby_root, standby_root


@dataclass
class ReplicaStatus:
    replica_dir: str
    changelog: str
    partition: int
    applied_offset: int | None
    lag_records: int | None
    lag_s: float | None
    follower_pid: int | None
    following: bool
    promotable: bool
    updated: str | None
    layout: str = "standby-root"  # "standby-root", "active-path", "old" (Samza's restore deletes it), "pre-restored"
    move_command: str | None = None  # for an old-layout replica: the command that moves it
    end_offset: int | None = None  # the changelog's end as the follower last saw it
    job: str | None = None  # whose replica it is, as its follower says (None: an older statectl's follower)
    job_id: str | None = None
    task: str | None = None
    store: str | None = None
    container: str | None = None  # the active container a container follower (follow --container) follows
    checkpoint_id: str | None = None  # layout "pre-restored": the checkpoint whose snapshot it holds


def replicas(state_dir: Path, root: Path | None = None) -> list[ReplicaStatus]:
    """The replicas of ``state_dir`` (their status files: in its standby root, ``root`` or the default beside it;
    in the standby root an older statectl kept in the state dir; beside a replica dir in a store's dir), with
    their lag as last reported, whether their follower runs, whether they are promotable (an offset file, no
    follower mid-seed), and their layout: ``standby-root``, ``active-path`` (the task's active store dir),
    ``pre-restored`` (follow --pre-restore), ``old`` (where an older statectl kept it, in the state dir:
    ``<state>/.statectl-standby/...``, which a container starting without a checkpoint clears, or
    ``<store>/Standby-<task>-<n>``, which the task's restore deletes; ``move_command`` names the command that
    moves it) or ``replica-dir`` (another dir in a store's dir). Reads only; NotFoundError (exit 10) when
    ``state_dir`` does not exist."""
    import shlex

    from statectl.formats.coordinator import active_of_standby

    if not state_dir.is_dir():
        raise NotFoundError(f"state dir {state_dir} does not exist")
    old_root = old_standby_root(state_dir)
    found = [(p, "root") for p in sorted(standby_root(state_dir, root).glob(f"*/*/*{STATUS_SUFFIX}"))]
    found += [(p, "old-root") for p in sorted(old_root.glob(f"*/*/*{STATUS_SUFFIX}"))]
    found += [(p, "store") for p in sorted(state_dir.glob(f"*/*{STATUS_SUFFIX}")) if p.parent.name != old_root.name]
    out = []
    for path, where in found:
        try:
            obj = json.loads(path.read_text())
            st = status_from_json(obj)
        except (OSError, ValueError, TypeError):
            continue
        name = path.name[:-len(STATUS_SUFFIX)]
        beside = os.path.realpath(st.replica_dir) == os.path.realpath(path.with_name(name))
        if where == "store" and not beside:
            continue  # a status file that names another dir: not a replica kept here
        lock = path.with_name(name + LOCK_SUFFIX)
        following = st.host == socket.gethostname() and process_alive(st.pid) and is_locked(lock)
        row = ReplicaStatus(st.replica_dir, st.changelog, st.partition, st.applied_offset, st.lag_records,
                            st.lag_s, st.pid if following else None, following,
                            (Path(st.replica_dir) / OFFSET_V2).exists(),
                            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(st.updated)) if st.updated else None,
                            end_offset=st.end_offset, job=st.job, job_id=st.job_id, task=st.task, store=st.store,
                            container=st.container)
        if st.layout == "pre-restored":  # follow --pre-restore (engine.standby.prerestore): a blob-store checkpoint dir
            row.layout, row.checkpoint_id = st.layout, st.checkpoint_id
            row.promotable = st.checkpoint_id is not None and Path(st.replica_dir).is_dir()
        elif where == "root":
            row.layout = "standby-root" if beside else "active-path"
        elif where == "store" and active_of_standby(name) is None:
            row.layout = "replica-dir"
        if where == "old-root" or (where == "store" and row.layout != "replica-dir"):
            row.layout = "old"
            row.move_command = _move_command(st, obj.get("argv"), shlex, following)
        out.append(row)
    return out


def _move_command(st: FollowStatus, argv: Any, shlex: Any, following: bool) -> str:
    """What moves an old-layout replica into the standby root: its follower's own command (without
    --replica-dir: the default dir is what moves it), run by this statectl once that follower stopped. The
    command is shown, never run: from its recorded settings, else from the command line an older statectl's
    follower recorded (``argv``), as statectl's arguments only."""
    if st.follower is not None:
        command = st.follower.command(replica_dir=False)
        return f"stop its follower (pid {st.pid}), then: {command}" if following else command
    args = [a for a in argv if isinstance(a, str)] if isinstance(argv, list) else []
    if args[1:3] == ["-m", "statectl"]:
        args = args[3:]
    elif args:
        args = args[1:]
    kept, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == "--replica-dir":
            skip = True
        elif not a.startswith("--replica-dir="):
            kept.append(a)
    command = "statectl " + shlex.join(kept) if kept else ("statectl standby follow (with the --kafka, --job, "
                                                           "--task, --store and --state-dir of its follower)")
    return (f"stop its follower (pid {st.pid}), then: {command}" if following else command)
