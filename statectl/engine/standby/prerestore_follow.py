"""follow_pre_restored: keep the latest snapshot of a store pre-restored on the standby host until stopped.

It reads the job's checkpoint topic on as checkpoints come (KafkaCheckpointLog), and for each new snapshot of the
store builds its checkpoint dir (engine.standby.prerestore.make_checkpoint_dir), then deletes the previous one.
Its lock (one follower per task and store) and status file sit in the standby root. Only on a host that runs no
active of the task (prerestore.check_here).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from statectl.blobstore.base import BlobStore
from statectl.catalog.kafka_log import KafkaCheckpointLog
from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.refs import StoreRef
from statectl.engine.standby.follow import FollowResult
from statectl.engine.standby.follower import FollowerSettings
from statectl.engine.standby.prerestore import (
    Halted,
    PRE_RESTORED,
    adopt_dir,
    check_here,
    check_not_half_promoted,
    checkpoint_base,
    lock_pre_restore,
    make_checkpoint_dir,
    move_old_pre_restore,
    own_status,
    owned_dirs,
    prerestore_replica,
    read_snapshot_index,
    remove_dead_stages,
)
from statectl.engine.standby.replica import FollowStatus, Replica, write_status
from statectl.errors import DiskFullError, NotFoundError, StatectlError
from statectl.formats.checkpoint import parse_checkpoint_id
from statectl.fsutil import make_dirs, owner_of
from statectl.kafka.client import KafkaSecurity
from statectl.local.layout import check_standby_root, checkpoint_dir, standby_root
from statectl.progress import NullProgress, ProgressReporter


POLL_S = 0.5


def follow_pre_restored(ref: StoreRef, state_dir: Path, bootstrap: str, blobstore: BlobStore,
                        catalog: BlobCheckpointStore, *, security: KafkaSecurity | None = None,
                        stop: threading.Event | None = None,
                        on_status: Callable[[FollowStatus], None] | None = None,
                        progress: ProgressReporter | None = None, status_every_s: float = 1.0,
                        poll_s: float = POLL_S, settings: FollowerSettings | None = None,
                        root: Path | None = None) -> FollowResult:
    """Keep the latest snapshot of ``ref``'s store pre-restored in the standby root (``root``, default beside the
    state dir), as the checkpoint dir Samza's next start reuses once promote renames it into the state dir, until
    ``stop`` is set (see the module doc); return what was done (``records_applied``: files
    downloaded; ``applied_offset``: None). Each snapshot's dir is built aside and renamed in (a kill leaves no
    partial dir under the checkpoint dir's name) and only then is the previous one deleted; a rerun finishes
    what a killed one left. Status lines (``on_status``) carry ``checkpoint_id`` (the one pre-restored),
    ``lag_records`` (1 while a newer snapshot is not pre-restored yet, else 0) and ``lag_s`` (the age of that
    newer checkpoint). A pre-restore an older statectl kept in the state dir is moved into the standby root
    first (with a note).

    Raises UsageError (exit 2, before anything is written) when this host runs the task's active
    (check_here), for a standby root in the state dir or on another filesystem (check_standby_root), or when a
    promote of the store was interrupted after its rename (promote again finishes it); LockHeldError (exit 11)
    when another follower pre-restores the store; DiskFullError (exit 1) when the disk fills (the previous dir
    kept). Brokers that stop answering and snapshots that cannot be
    read are ridden out with a note (a snapshot that failed is tried again when a newer one lands)."""
    progress = progress or NullProgress()
    stop = stop or threading.Event()
    began = time.monotonic()
    anchor = prerestore_replica(state_dir, ref, root)
    check_standby_root(state_dir, standby_root(state_dir, root))
    check_here(anchor, bootstrap, security=security)
    result = FollowResult("", None, 0, 0, 0.0)
    log = KafkaCheckpointLog(bootstrap, ref.job, ref.job_id, security=security)
    try:
        anchor = replace(anchor, changelog=log.topic)  # a BATCH job's carries its run id, as the log reads it
        make_dirs(standby_root(state_dir, root), owner_of(state_dir))
        with lock_pre_restore(anchor):
            move_old_pre_restore(anchor, state_dir, progress)
            previous = own_status(anchor)
            check_not_half_promoted(anchor, previous)
            status = FollowStatus(previous.replica_dir if previous else "", anchor.changelog, 0, os.getpid(),
                                  socket.gethostname(), follower=settings,
                                  job=ref.job, job_id=ref.job_id, task=ref.task, store=ref.store,
                                  layout=PRE_RESTORED,
                                  checkpoint_id=previous.checkpoint_id if previous else None,
                                  pending_dir=previous.pending_dir if previous else None,
                                  seeded_from=previous.seeded_from if previous else None)
            remove_dead_stages(anchor)
            if status.replica_dir and not Path(status.replica_dir).is_dir():
                status.replica_dir, status.checkpoint_id = "", None  # gone (a Samza start took it)
            write_status(anchor, status)
            said: dict[str, str] = {}
            failed: set[str] = set()
            last_status = 0.0
            latest: tuple[str, str] | None = None

            def say(kind: str, text: str | None) -> None:
                if text is not None and said.get(kind) != text:
                    progress.note(text)
                if text is None:
                    said.pop(kind, None)
                else:
                    said[kind] = text

            while not stop.is_set():
                try:
                    latest = log.latest(ref)
                    say("kafka", None)
                    if latest is None:
                        say("wait", f"the latest checkpoint of task {ref.task!r} names no snapshot of store "
                                    f"{ref.store!r}: waiting for one")
                except NotFoundError as e:
                    latest = None
                    say("wait", f"{e}: waiting for one")
                except StatectlError as e:
                    say("kafka", f"checkpoint topic {log.topic}: {e}; following on")
                if latest is not None and latest[1] != status.seeded_from and latest[1] not in failed:
                    say("wait", None)
                    try:
                        _pre_restore(anchor, state_dir, latest[1], blobstore, catalog, status, stop, progress,
                                     result)
                    except Halted:
                        break
                    except DiskFullError:
                        raise
                    except StatectlError as e:
                        failed.add(latest[1])
                        progress.note(f"pre-restoring snapshot {latest[1]} of checkpoint {latest[0]} failed: {e}; "
                                      "trying again when a newer snapshot lands")
                now = time.monotonic()
                if now - last_status >= status_every_s or stop.is_set():
                    _lag(status, latest)
                    write_status(anchor, status)
                    if on_status is not None:
                        on_status(status)
                    last_status = now
                stop.wait(poll_s)
            _lag(status, latest)
            write_status(anchor, status)
    finally:
        log.close()
    result.replica_dir = status.replica_dir
    result.duration_s = round(time.monotonic() - began, 3)
    result.notes = list(getattr(progress, "notes", []))
    return result


def _lag(status: FollowStatus, latest: tuple[str, str] | None) -> None:
    if latest is None:
        return
    if latest[1] == status.seeded_from:
        status.lag_records, status.lag_s = 0, 0.0
        return
    status.lag_records = 1
    try:
        status.lag_s = round(max(0.0, time.time() - parse_checkpoint_id(latest[0])[0] / 1000), 3)
    except ValueError:
        status.lag_s = None


def _pre_restore(anchor: Replica, state_dir: Path, blob_id: str, blobstore: BlobStore, catalog: BlobCheckpointStore,
                 status: FollowStatus, stop: threading.Event, progress: ProgressReporter,
                 result: FollowResult) -> None:
    began = time.monotonic()
    index = read_snapshot_index(blobstore, blob_id)
    cp = index.snapshot_metadata.checkpoint_id
    target = checkpoint_dir(checkpoint_base(anchor), cp)
    if os.path.lexists(target) and str(target) not in owned_dirs(status):
        # Not statectl's (in an old layout, the job's own checkpoint dir): never replaced nor deleted.
        status.seeded_from = blob_id
        progress.note(f"{target} exists and statectl did not make it (the job's own checkpoint dir): left as it is")
        return
    made = make_checkpoint_dir(anchor, state_dir, blob_id, index, blobstore, catalog, status,
                 lambda: "stopped" if stop.is_set() else None, progress)
    adopt_dir(anchor, status, made, blob_id)
    result.records_applied += made.downloaded
    progress.note(f"pre-restored snapshot {blob_id} (checkpoint {cp}) into {target}: {made.downloaded} files "
                  f"downloaded ({made.bytes_downloaded} bytes), {made.reused} reused from local files, in "
                  f"{time.monotonic() - began:.2f}s")
    if made.differences:
        progress.note(f"warning: {target} is not identical to the snapshot by Samza's rule "
                      f"({'; '.join(made.differences)}): the job's start would download it again")
