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
            run = _PreRestoring(anchor, state_dir, log, blobstore, catalog, stop or threading.Event(), progress,
                                result)
            run.start(settings)
            run.loop(on_status, status_every_s, poll_s)
    finally:
        log.close()
    result.replica_dir = run.status.replica_dir
    result.duration_s = round(time.monotonic() - began, 3)
    result.notes = list(progress.notes)
    return result


class _PreRestoring:
    """One follow_pre_restored under its lock: the status it writes, the latest checkpoint seen, the snapshots
    that failed (tried again only when a newer one lands), and the notes said (each said once, until it changes)."""

    def __init__(self, anchor: Replica, state_dir: Path, log: KafkaCheckpointLog, blobstore: BlobStore,
                 catalog: BlobCheckpointStore, stop: threading.Event, progress: ProgressReporter,
                 result: FollowResult):
        self.anchor, self.state_dir, self.log, self.blobstore, self.catalog = anchor, state_dir, log, blobstore, catalog
        self.stop, self.progress, self.result = stop, progress, result
        self.said: dict[str, str] = {}
        self.failed: set[str] = set()
        self.latest: tuple[str, str] | None = None

    def start(self, settings: FollowerSettings | None) -> None:
        """The status file, from the previous one (its dirs are this follower's); dead staged dirs removed."""
        anchor, ref = self.anchor, self.anchor.ref
        previous = own_status(anchor)
        check_not_half_promoted(anchor, previous)
        self.status = status = FollowStatus(
            previous.replica_dir if previous else "", anchor.changelog, 0, os.getpid(), socket.gethostname(),
            follower=settings, job=ref.job, job_id=ref.job_id, task=ref.task, store=ref.store, layout=PRE_RESTORED,
            checkpoint_id=previous.checkpoint_id if previous else None,
            pending_dir=previous.pending_dir if previous else None,
            seeded_from=previous.seeded_from if previous else None)
        remove_dead_stages(anchor)
        if status.replica_dir and not Path(status.replica_dir).is_dir():
            status.replica_dir, status.checkpoint_id = "", None  # gone (a Samza start took it)
        write_status(anchor, status)

    def loop(self, on_status: Callable[[FollowStatus], None] | None, status_every_s: float, poll_s: float) -> None:
        """Poll the checkpoint topic and pre-restore each new snapshot, reporting, until stopped."""
        last_status = 0.0
        while not self.stop.is_set():
            if not self._poll():
                break
            now = time.monotonic()
            if now - last_status >= status_every_s or self.stop.is_set():
                _lag(self.status, self.latest)
                write_status(self.anchor, self.status)
                self.progress.status(self.subject, checkpoint=self.status.checkpoint_id, lag=self.status.lag_records,
                                     lag_s=self.status.lag_s, downloaded=self.result.records_applied)
                if on_status is not None:
                    on_status(self.status)
                last_status = now
            self.stop.wait(poll_s)
        self.progress.status(self.subject)  # its line ends with the follower
        _lag(self.status, self.latest)
        write_status(self.anchor, self.status)

    @property
    def subject(self) -> str:
        return f"pre-restore of {self.anchor.ref.store} {self.anchor.ref.task}"

    def _say(self, kind: str, text: str | None) -> None:
        if text is not None and self.said.get(kind) != text:
            self.progress.note(text)
        if text is None:
            self.said.pop(kind, None)
        else:
            self.said[kind] = text

    def _poll(self) -> bool:
        """Read the latest checkpoint and pre-restore its snapshot when it is new; False once stopped mid-way.
        Brokers that fail and snapshots that cannot be read are noted and ridden out."""
        ref = self.anchor.ref
        try:
            self.latest = self.log.latest(ref)
            self._say("kafka", None)
            if self.latest is None:
                self._say("wait", f"the latest checkpoint of task {ref.task!r} names no snapshot of store "
                                  f"{ref.store!r}: waiting for one")
        except NotFoundError as e:
            self.latest = None
            self._say("wait", f"{e}: waiting for one")
        except StatectlError as e:
            self._say("kafka", f"checkpoint topic {self.log.topic}: {e}; following on")
        latest = self.latest
        if latest is None or latest[1] == self.status.seeded_from or latest[1] in self.failed:
            return True
        self._say("wait", None)
        try:
            _pre_restore(self.anchor, self.state_dir, latest[1], self.blobstore, self.catalog, self.status,
                         self.stop, self.progress, self.result)
        except Halted:
            return False
        except DiskFullError:
            raise
        except StatectlError as e:
            self.failed.add(latest[1])
            self.progress.note(f"pre-restoring snapshot {latest[1]} of checkpoint {latest[0]} failed: {e}; "
                               "trying again when a newer snapshot lands")
        return True


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
