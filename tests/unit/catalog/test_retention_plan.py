"""Retention as plan -> execute (statectl.catalog.retention), on a real file:// blob store: snapshots are
built by hand (a few tiny blobs, an index, a catalog record) so that every case says exactly which blob
belongs to which snapshot. The reader pins (statectl.catalog.pins) that retention honours are here too."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from statectl.blobstore import open_blobstore
from statectl.blobstore.base import BlobStore
from statectl.catalog import pins as pins_mod
from statectl.catalog.index import write_index
from statectl.catalog.pins import ReaderPin, live_pins, pins_prefix, read_pins, stale_pins
from statectl.catalog.records import COMMITTED, EXPIRED, BlobCheckpointStore, CheckpointRecord, iso_utc
from statectl.catalog.refs import StoreRef
from statectl.catalog.retention import execute, plan_retention, post_commit_cleanup
from statectl.errors import AuthError, SnapshotNotFoundError
from statectl.snapshot.model import DirIndex, FileBlob, FileIndex, FileMetadata, SnapshotIndex, SnapshotMetadata

REF = StoreRef("plan", "1", "Partition 0", "counts")


@pytest.fixture
def bs(tmp_path: Path) -> Iterator[BlobStore]:
    store = open_blobstore(f"file://{tmp_path / 'blobs'}")
    yield store
    store.close()


@pytest.fixture
def cps(bs: BlobStore) -> BlobCheckpointStore:
    return BlobCheckpointStore(bs)


class Chain:
    """Snapshots of REF taken by hand: ``take({"a": b"..", ...})`` uploads the files that changed since the
    previous snapshot, writes its index (files gone since then marked removed) and commits its record."""

    def __init__(self, bs: BlobStore, cps: BlobCheckpointStore, keep_last: int = 1):
        self.bs, self.cps, self.keep_last = bs, cps, keep_last
        self.files: dict[str, FileIndex] = {}
        self.prev: str | None = None
        self.n = 0

    def take(self, contents: dict[str, bytes], *, commit: bool = True) -> tuple[CheckpointRecord, SnapshotIndex]:
        self.n += 1
        present = {}
        for name, data in contents.items():
            old = self.files.get(name)
            if old is not None and old.checksum == zlib.crc32(data) and old.size == len(data):
                present[name] = old
                continue
            blob = self.bs.put(io.BytesIO(data), size=len(data), ttl_seconds=3600)
            meta = FileMetadata(1000, 1000, len(data), "u", "g", "rw-r--r--")
            present[name] = FileIndex(name, (FileBlob(blob, 0),), meta, zlib.crc32(data))
        removed = [f for name, f in self.files.items() if present.get(name) is not f]
        cid = f"{1_700_000_000_000 + self.n}-{self.n}"
        index = SnapshotIndex(1_700_000_000_000 + self.n, SnapshotMetadata(cid, *_parts(REF)),
                              DirIndex("", tuple(sorted(present.values(), key=lambda f: f.file_name)),
                                       tuple(removed)), self.prev)
        index_id = write_index(self.bs, index, 3600)
        record = CheckpointRecord(cid, index_id, index.creation_time_millis, keep_last=self.keep_last)
        if commit:
            self.cps.commit(REF, record)
        self.files, self.prev = present, index_id
        return record, index

    def blob(self, name: str) -> str:
        return self.files[name].blobs[0].blob_id


def _parts(ref: StoreRef) -> tuple[str, str, str, str]:
    return ref.job, ref.job_id, ref.task, ref.store


def tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def keys(bs: BlobStore, prefix: str = "blobs/") -> set[str]:
    return {i.key for i in bs.list(prefix)}


def test_plan_writes_nothing_and_says_what_goes_and_why(bs, cps, tmp_path: Path):
    chain = Chain(bs, cps, keep_last=2)
    s1, _ = chain.take({"000001.sst": b"one", "MANIFEST": b"m1"})
    sst1, manifest1 = chain.blob("000001.sst"), chain.blob("MANIFEST")
    s2, _ = chain.take({"000001.sst": b"one", "000002.sst": b"two", "MANIFEST": b"m2"})
    s3, i3 = chain.take({"000002.sst": b"two", "000003.sst": b"three", "MANIFEST": b"m3"})
    before = tree(tmp_path / "blobs")

    plan = plan_retention(bs, cps, REF, s3, i3)
    assert tree(tmp_path / "blobs") == before  # planning writes nothing, not even a TTL
    assert plan.keep_last == 2
    assert [r.checkpoint_id for r in plan.kept] == [s3.checkpoint_id, s2.checkpoint_id]
    assert [e.record.checkpoint_id for e in plan.expire] == [s1.checkpoint_id]
    assert "older than the newest 2 kept" in plan.expire[0].reason
    assert plan.snapshots_expired == 1 and not plan.held and not plan.missing
    # Snapshot 2 is kept: 000001.sst, which snapshot 3 removed, is still its; snapshot 1's MANIFEST and
    # index are nobody's.
    reasons = {d.blob_id: d.reason for d in plan.delete}
    assert sst1 not in reasons
    assert set(reasons) == {s1.index_blob_id, manifest1}
    assert reasons[manifest1] == f"snapshot {s1.checkpoint_id} expired: {plan.expire[0].reason}"
    assert reasons[s1.index_blob_id].startswith(f"index of snapshot {s1.checkpoint_id} expired")
    assert plan.ttl_to_remove[-1] == s3.index_blob_id
    assert set(plan.ttl_to_remove[:-1]) == set(i3.present_blob_ids())

    stats = execute(plan, bs, cps)
    assert stats.snapshots_expired == 1 and stats.records_forgotten == 1
    assert sorted(stats.deleted) == sorted(reasons)
    assert [r.checkpoint_id for r in cps.list(REF)] == [s3.checkpoint_id, s2.checkpoint_id]
    assert cps.latest(REF).cleanup_done
    assert all(bs.stat(b).expires_at is None for b in plan.ttl_to_remove)


def test_removed_files_and_the_previous_index_go_data_first(bs, cps):
    chain = Chain(bs, cps)
    s1, _ = chain.take({"000001.sst": b"one", "000002.sst": b"two", "MANIFEST": b"m1"})
    sst1 = chain.blob("000001.sst")
    gone = {sst1, chain.blob("MANIFEST")}
    s2, i2 = chain.take({"000002.sst": b"two", "000003.sst": b"three", "MANIFEST": b"m2"})

    plan = plan_retention(bs, cps, REF, s2, i2)
    assert [d.blob_id for d in plan.delete][-1] == s1.index_blob_id  # the index blob last
    assert {d.blob_id for d in plan.delete} == gone | {s1.index_blob_id}
    why = {d.blob_id: d.reason for d in plan.delete}
    assert why[sst1] == f"file 000001.sst removed by checkpoint {s2.checkpoint_id}"
    assert why[s1.index_blob_id].startswith(f"index of the snapshot before checkpoint {s2.checkpoint_id}")
    assert plan.as_stats().deleted == [d.blob_id for d in plan.delete]

    post_commit_cleanup(bs, cps, REF, s2, i2)
    assert keys(bs) == {s2.index_blob_id, *i2.present_blob_ids()}


def test_with_a_grace_a_dropped_snapshot_is_marked_now_and_its_blobs_go_after_the_deadline(bs, cps):
    """The grace period protects readers that could not pin (read-only credentials): the dropped snapshot
    is out of the list at once, its blobs and record stay until the deadline it was marked with (or a
    later run's shorter grace since the marking is over); the first cleanup after that deletes them."""
    chain = Chain(bs, cps)
    s1, _ = chain.take({"000001.sst": b"one", "MANIFEST": b"m1"})
    s2, i2 = chain.take({"000002.sst": b"two", "MANIFEST": b"m2"})
    before = keys(bs)

    plan = plan_retention(bs, cps, REF, s2, i2, grace_seconds=60, now_ms=1_000_000)
    assert not plan.expire and [e.record.checkpoint_id for e in plan.cooling] == [s1.checkpoint_id]
    assert plan.cooling[0].until_ms == 1_060_000 and plan.snapshots_expired == 1
    assert plan.delete == []  # neither its files (000001.sst, MANIFEST m1) nor its index
    stats = execute(plan, bs, cps)
    assert keys(bs) == before and stats.blobs_deleted == 0
    assert stats.snapshots_expired == 1 and [e.until_ms for e in stats.expired] == [1_060_000]
    assert [r.checkpoint_id for r in cps.list(REF)] == [s2.checkpoint_id]
    (marked,) = [r for r in cps.records(REF) if r.state == EXPIRED]
    assert (marked.expired_ms, marked.delete_after_ms) == (1_000_000, 1_060_000)

    # Before the deadline a run with a longer grace keeps it; at the deadline it goes, and so it does
    # as soon as a run's own shorter grace since the marking is over.
    early = plan_retention(bs, cps, REF, s2, i2, grace_seconds=3600, now_ms=1_059_999)
    assert [e.record.checkpoint_id for e in early.cooling] == [s1.checkpoint_id] and not early.delete
    assert early.snapshots_expired == 0
    assert [e.record.checkpoint_id for e in
            plan_retention(bs, cps, REF, s2, i2, grace_seconds=10, now_ms=1_010_000).expire] == [s1.checkpoint_id]
    late = plan_retention(bs, cps, REF, s2, i2, grace_seconds=3600, now_ms=1_060_000)
    assert [e.record.checkpoint_id for e in late.expire] == [s1.checkpoint_id] and not late.cooling
    assert late.snapshots_expired == 0  # it was expired before: not counted again
    stats = execute(late, bs, cps)
    assert stats.records_forgotten == 1 and [e.record.checkpoint_id for e in stats.forgotten] == [s1.checkpoint_id]
    assert keys(bs) == {s2.index_blob_id, *i2.present_blob_ids()}
    assert [r.checkpoint_id for r in cps.records(REF)] == [s2.checkpoint_id]


def test_an_expired_record_of_an_older_statectl_has_no_deadline(bs, cps):
    chain = Chain(bs, cps)
    s1, _ = chain.take({"a": b"1"})
    s2, i2 = chain.take({"b": b"2"})
    # As an older statectl left it: expired, without the time fields.
    bs.put_at(f"checkpoints/plan/1/Partition%200/counts/{s1.checkpoint_id}.json", json.dumps({
        "checkpoint-id": s1.checkpoint_id, "snapshot-index-blob-id": s1.index_blob_id,
        "created-time-millis": s1.created_ms, "cleanup-done": False, "state": "expired", "keep-last": 1}).encode())
    plan = plan_retention(bs, cps, REF, s2, i2, grace_seconds=3600)
    assert [e.record.checkpoint_id for e in plan.expire] == [s1.checkpoint_id]
    assert plan.expire[0].reason == "marked expired earlier"


def test_only_expired_records_carry_the_time_fields(bs, cps):
    chain = Chain(bs, cps)
    s1, _ = chain.take({"a": b"1"})
    raw = json.loads(_read(bs, s1.checkpoint_id))
    assert set(raw) == {"checkpoint-id", "snapshot-index-blob-id", "created-time-millis", "cleanup-done", "state",
                        "keep-last"}


def _read(bs: BlobStore, checkpoint_id: str) -> bytes:
    buf = io.BytesIO()
    bs.get(f"checkpoints/plan/1/Partition%200/counts/{checkpoint_id}.json", buf)
    return buf.getvalue()


def test_a_dry_run_plan_matches_what_execute_does(bs, cps):
    chain = Chain(bs, cps, keep_last=3)
    for n in range(4):
        record, index = chain.take({f"{n:06d}.sst": bytes([n]) * 10, "MANIFEST": b"m%d" % n})
    dry = post_commit_cleanup(bs, cps, REF, record, index, keep_last=1, dry_run=True)
    assert len(cps.list(REF)) == 4
    real = post_commit_cleanup(bs, cps, REF, record, index, keep_last=1)
    assert (dry.deleted, dry.records_forgotten, dry.snapshots_expired) == \
           (real.deleted, real.records_forgotten, real.snapshots_expired) and real.snapshots_expired == 3
    assert cps.latest(REF).keep_last == 1


def test_check_present_finds_what_execute_would_and_nothing_is_deleted(bs, cps):
    chain = Chain(bs, cps)
    s1, _ = chain.take({"a": b"1"})
    s2, i2 = chain.take({"a": b"2", "b": b"3"})
    bs.delete([chain.blob("b")])  # something deleted a blob of the latest snapshot
    plan = plan_retention(bs, cps, REF, s2, i2, check_present=True)
    assert plan.missing == [chain.blob("b")]
    stats = execute(plan, bs, cps)
    assert stats.missing == [chain.blob("b")] and not stats.deleted
    assert [r.checkpoint_id for r in cps.records(REF)] == [s2.checkpoint_id, s1.checkpoint_id]
    assert not cps.latest(REF).cleanup_done


def test_a_record_naming_something_else_never_deletes_it(bs, cps):
    chain = Chain(bs, cps)
    s1, _ = chain.take({"a": b"1"})
    cps.write(REF, replace(s1, index_blob_id="leases/plan/1/Partition%200/counts.json"))
    s2, i2 = chain.take({"a": b"2"})
    plan = plan_retention(bs, cps, REF, s2, i2)
    assert all(d.blob_id.startswith("blobs/") for d in plan.delete)


# ---- reader pins ---------------------------------------------------------------------------------------


def pin_body(index_blob_id: str, *, expires_at: float, host: str = "elsewhere.example", pid: int = 4242) -> bytes:
    return json.dumps({"index_blob_id": index_blob_id, "checkpoint_id": "", "store": str(REF),
                       "operation": "restore", "host": host, "pid": pid, "started": time.time(),
                       "expires_at": expires_at}).encode()


def test_a_pinned_snapshot_is_held_not_expired(bs, cps):
    chain = Chain(bs, cps)
    s1, i1 = chain.take({"a": b"1", "b": b"2"})
    with ReaderPin(bs, cps, REF) as pin:
        assert pin.resolve(None).index_blob_id == s1.index_blob_id and pin.held
        assert [p.index_blob_id for p in live_pins(bs, REF)] == [s1.index_blob_id]
        s2, i2 = chain.take({"a": b"1", "c": b"3"})
        stats = post_commit_cleanup(bs, cps, REF, s2, i2)
        assert [h.record.checkpoint_id for h in stats.held] == [s1.checkpoint_id]
        assert not stats.deleted and stats.snapshots_expired == 0
        assert {r.checkpoint_id: r.state for r in cps.records(REF)} == {s1.checkpoint_id: COMMITTED,
                                                                         s2.checkpoint_id: COMMITTED}
        assert {s1.index_blob_id, *i1.present_blob_ids()} <= keys(bs)
    assert not list(bs.list("pins/"))  # released: deleted
    s3, i3 = chain.take({"a": b"1", "c": b"3", "d": b"4"})
    stats = post_commit_cleanup(bs, cps, REF, s3, i3)
    assert stats.snapshots_expired == 2  # the one held before, and the one before this
    assert keys(bs) == {s3.index_blob_id, *i3.present_blob_ids()}


def test_a_pin_taken_between_plan_and_execute_keeps_the_blobs_and_the_marked_record(bs, cps):
    chain = Chain(bs, cps)
    s1, i1 = chain.take({"a": b"1", "b": b"2"})
    s2, i2 = chain.take({"a": b"1", "c": b"3"})
    plan = plan_retention(bs, cps, REF, s2, i2)
    assert [e.record.checkpoint_id for e in plan.expire] == [s1.checkpoint_id]
    pin = ReaderPin(bs, cps, REF)
    pin.resolve(s1.checkpoint_id)  # a reader that pinned after the plan, before the marking
    try:
        stats = execute(plan, bs, cps)
        assert [h.record.checkpoint_id for h in stats.held] == [s1.checkpoint_id]
        assert stats.snapshots_expired == 1 and stats.records_forgotten == 0
        assert not set(stats.deleted) & {s1.index_blob_id, *i1.present_blob_ids()}
        assert {r.checkpoint_id: r.state for r in cps.records(REF)}[s1.checkpoint_id] == EXPIRED
        assert cps.latest(REF).cleanup_done
        # A second reader comes too late: the record is marked, so it lets the snapshot go.
        with ReaderPin(bs, cps, REF) as late, pytest.raises(SnapshotNotFoundError, match="expired by retention at "):
            late.resolve(s1.checkpoint_id)
    finally:
        pin.release()
    # The next cleanup, with no pin left, finishes the marked snapshot.
    again = plan_retention(bs, cps, REF, s2, i2)
    assert [(e.record.checkpoint_id, e.reason) for e in again.expire] == \
           [(s1.checkpoint_id, "marked expired at " + iso_utc(cps.records(REF)[-1].expired_ms / 1000))]
    assert again.snapshots_expired == 0
    execute(again, bs, cps)
    assert keys(bs) == {s2.index_blob_id, *i2.present_blob_ids()}
    assert [r.checkpoint_id for r in cps.records(REF)] == [s2.checkpoint_id]


def test_a_reader_that_lost_the_race_lets_the_snapshot_go(bs, cps):
    """The snapshot is marked expired between the reader's resolve and its pin: the check after the pin
    sees it. Named by id it is not found; as "the latest" the reader takes the new latest."""
    chain = Chain(bs, cps)
    s1, _ = chain.take({"a": b"1"})

    class Racing:
        """The blob store, but a backup commits and expires s1 just before the reader's pin lands."""

        def __init__(self, inner: BlobStore):
            self.inner, self.raced = inner, False

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def put_at(self, key, data, **kw):
            if key.startswith("pins/") and not self.raced:
                self.raced = True
                s2, i2 = chain.take({"a": b"2"})
                post_commit_cleanup(self.inner, cps, REF, s2, i2)
            return self.inner.put_at(key, data, **kw)

    racing = Racing(bs)
    with ReaderPin(racing, cps, REF) as pin, pytest.raises(SnapshotNotFoundError, match="expired by retention"):
        pin.resolve(s1.checkpoint_id)
    chain.take({"a": b"3"}, commit=True)
    latest = cps.latest(REF)
    racing.raced = False
    with ReaderPin(racing, cps, REF) as pin:
        snap = pin.resolve(None)
        assert snap.index_blob_id == cps.latest(REF).index_blob_id != latest.index_blob_id
        assert [p.index_blob_id for p in live_pins(bs, REF)] == [snap.index_blob_id]


def test_a_reader_that_cannot_write_goes_on_unpinned_with_a_note(bs, cps):
    chain = Chain(bs, cps)
    s1, _ = chain.take({"a": b"1"})

    class ReadOnly:
        def __init__(self, inner: BlobStore):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def put_at(self, key, data, **kw):
            raise AuthError(f"s3: put {key}: access denied (AccessDenied: Access Denied.)")

    from statectl.progress import NullProgress

    progress = NullProgress()
    with ReaderPin(ReadOnly(bs), cps, REF, progress=progress) as pin:
        assert pin.resolve(None).index_blob_id == s1.index_blob_id
        assert not pin.held
    assert len(progress.notes) == 1 and "no reader pin" in progress.notes[0]
    assert "credentials cannot write" in progress.notes[0]
    assert not list(bs.list("pins/"))


def test_pins_that_no_longer_bind_are_ignored_and_stale(bs, cps, monkeypatch):
    monkeypatch.setattr("statectl.catalog.lease.CLOCK_SLACK_SECONDS", 0)
    chain = Chain(bs, cps)
    s1, _ = chain.take({"a": b"1"})
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    import socket

    prefix = pins_prefix(REF)
    bs.put_at(prefix + "expired.json", pin_body(s1.index_blob_id, expires_at=time.time() - 1))
    bs.put_at(prefix + "dead.json", pin_body(s1.index_blob_id, expires_at=time.time() + 600,
                                             host=socket.gethostname(), pid=int(dead.stdout)))
    bs.put_at(prefix + "junk.json", b"[not a pin]")
    bs.put_at(prefix + "live.json", pin_body(s1.index_blob_id, expires_at=time.time() + 600))
    found = {p.key.rsplit("/", 1)[-1]: p for p in read_pins(bs)}
    assert {k for k, p in found.items() if p.live} == {"live.json"}
    assert found["junk.json"].problem == "not a JSON object"
    stale = stale_pins(list(found.values()), older_than=time.time() - 3600)
    assert {p.key.rsplit("/", 1)[-1] for p in stale} == {"expired.json", "dead.json"}  # junk: too young yet
    stale = stale_pins(list(found.values()), older_than=time.time() + 1)
    assert {p.key.rsplit("/", 1)[-1] for p in stale} == {"expired.json", "dead.json", "junk.json"}


def test_the_pin_is_renewed_and_a_removed_pin_is_lost_not_recreated(bs, cps, monkeypatch):
    chain = Chain(bs, cps)
    chain.take({"a": b"1"})
    with ReaderPin(bs, cps, REF, seconds=3) as pin:
        pin.resolve(None)
        first = read_pins(bs)[0].expires_at
        deadline = time.time() + 10
        while read_pins(bs)[0].expires_at == first and time.time() < deadline:
            time.sleep(0.1)
        assert read_pins(bs)[0].expires_at > first  # renewed in the background
        bs.delete([pin.key])  # gc took it for a dead reader's
        pin.renew()
        assert pin.lost and not pin.held
        assert not list(bs.list("pins/"))


def test_renewal_after_the_expiry_loses_the_pin(bs, cps):
    chain = Chain(bs, cps)
    chain.take({"a": b"1"})
    pin = ReaderPin(bs, cps, REF, seconds=300)
    pin.resolve(None)
    pin._stop.set()  # no background renewal: the process stalled
    pin._expires = time.time() - 1
    pin.renew()
    assert pin.lost == "it expired before it could be renewed"
    pin.release()
    assert not list(bs.list("pins/"))


def test_restoring_another_stores_snapshot_pins_it_under_its_owner(bs, cps):
    chain = Chain(bs, cps)
    s1, _ = chain.take({"a": b"1"})
    other = StoreRef("other", "1", "Partition 0", "counts")
    with ReaderPin(bs, cps, other) as pin:
        pin.resolve(s1.index_blob_id, allow_other_store=True)
        assert [p.key.startswith(pins_prefix(REF)) for p in read_pins(bs)] == [True]
    assert pins_mod.ref_of_pin_key(pins_prefix(REF) + "x.json") == REF
    assert pins_mod.ref_of_pin_key("pins/x.json") is None
