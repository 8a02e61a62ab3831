"""The store lease (statectl.catalog.lease) against hostile lease records and a gc holding it, on a real
file:// blob store; end to end through the CLI in tests/integration/test_hostile_secrets_lease.py.

No wall-clock assertions: whether a backup waited shows in its notice and in who holds the lease after;
"at once" is bounded by a timeout well under GC_WAIT_SECONDS, which a wait would run into."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from statectl.blobstore import open_blobstore
from statectl.blobstore.base import BlobStore
from statectl.catalog import lease as lease_mod
from statectl.catalog.lease import Lease, break_lease, inspect_lease, lease_key, live_leases, read_lease
from statectl.catalog.refs import StoreRef
from statectl.errors import LockHeldError

REF = StoreRef("lease-more", "1", "Partition 0", "counts")
HUGE = "1" + "0" * 400  # an int no float holds


@pytest.fixture
def bs(tmp_path) -> Iterator[BlobStore]:
    store = open_blobstore(f"file://{tmp_path / 'blobs'}")
    yield store
    store.close()


def body(expires: str, **extra: object) -> bytes:
    """A lease body as a foreign writer might leave it: ``expires`` is raw JSON text."""
    fields = dict({"owner": "x", "host": "elsewhere.example", "pid": 4242, "operation": "backup",
                   "store": str(REF), "started": time.time() - 60, "released": False}, **extra)
    text = json.dumps(fields)
    return (text[:-1] + f', "expires": {expires}}}').encode()


MALFORMED = {
    "1e20": body("1e20"), "NaN": body("NaN"), "Infinity": body("Infinity"), "string": body('"tomorrow"'),
    "negative": body("-5"), "huge int": body(HUGE), "far ahead": body(str(int(time.time()) + 100 * 365 * 86400)),
    "bool": body("true"), "no expires": b'{"owner": "x", "host": "h", "pid": 1}', "list": b"[1, 2]",
    "not json": b"\xff\xfenot json", "bad pid": body(str(int(time.time()) + 200), pid=2 ** 40),
    "bad released": body(str(int(time.time()) + 200), released="no"),
    "bad started": body(str(int(time.time()) + 200), started=1e300),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_lease_is_reported_taken_over_and_breakable(bs, name):
    bs.put_at(lease_key(REF), MALFORMED[name])
    found = inspect_lease(bs, REF)
    assert found is not None
    info, problem = found
    assert problem and not info.live and not info.local_alive
    assert info.expires == "" or info.expires.endswith("Z")
    assert live_leases(bs) == []  # binds nobody: gc does not protect anything for it

    # lease break replaces it with a well-formed released record.
    done = break_lease(bs, REF, expected=info)
    assert done.released and not done.live
    again, problem = inspect_lease(bs, REF)
    # A released lease binds nobody: when it was released, no expiry.
    assert problem == "" and again.released and again.released_at.endswith("Z") and again.expires == ""

    # A backup takes a malformed record over (conditionally) and says so.
    bs.put_at(lease_key(REF), MALFORMED[name])
    lease = Lease(bs, REF, seconds=60)
    lease.acquire()
    try:
        assert lease.notice and "malformed" in lease.notice
        info, problem = inspect_lease(bs, REF)
        assert problem == "" and info.live and info.operation == "backup"
    finally:
        lease.release()


def test_a_malformed_lease_on_this_host_is_breakable_without_force(bs):
    """Its pid cannot be trusted when the rest of it is garbage."""
    bs.put_at(lease_key(REF), body("1e20", host=socket.gethostname(), pid=1))
    info = read_lease(bs, REF)
    assert info is not None and not info.local_alive
    assert break_lease(bs, REF, expected=info).released


def test_well_formed_leases_read_as_before(bs):
    now = time.time()
    bs.put_at(lease_key(REF), body(str(now + 200)))
    info, problem = inspect_lease(bs, REF)
    assert problem == "" and info.live and info.host == "elsewhere.example" and info.pid == 4242
    with pytest.raises(LockHeldError):
        Lease(bs, REF).acquire()
    bs.put_at(lease_key(REF), b'{"owner": "someone-else", "expires": 0}')  # expired, old-style: no problem
    info, problem = inspect_lease(bs, REF)
    assert problem == "" and not info.live


def test_a_released_lease_shows_when_it_was_released_and_no_expiry(bs, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from statectl.cli.main import app
    from tests.tools.standby_helpers import isolate_cli

    isolate_cli(tmp_path, monkeypatch)
    where = ["--blobstore", bs.url, "--job", REF.job, "--store", REF.store]
    with Lease(bs, REF, seconds=300):
        held = read_lease(bs, REF)
    info = read_lease(bs, REF)
    assert held.expires and not held.released and held.released_at == ""
    assert info.released and info.expires == "" and info.released_at.endswith("Z") and info.broken_by == ""
    text = CliRunner().invoke(app, ["lease", "show", *where]).stdout
    assert text.startswith(f"lease of {REF}: released at {info.released_at}; last held by backup on host "
                           f"{socket.gethostname()}") and "expires" not in text, text
    shown = json.loads(CliRunner().invoke(app, ["lease", "show", *where, "-o", "json"]).stdout)
    assert (shown["released"], shown["expires"], shown["released_at"]) == (True, "", info.released_at)
    # Broken by an operator: when and by whom.
    bs.put_at(lease_key(REF), body(str(time.time() + 200)))
    break_lease(bs, REF, expected=read_lease(bs, REF))
    text = CliRunner().invoke(app, ["lease", "show", *where]).stdout
    assert f"released at {read_lease(bs, REF).released_at} (broken by {socket.gethostname()}:" in text, text
    assert "expires" not in text and "last held by backup on host elsewhere.example" in text


# ---- a gc holding the lease --------------------------------------------------------------------------


def _release_later(lease: Lease, after: float) -> threading.Thread:
    t = threading.Thread(target=lambda: (time.sleep(after), lease.release()), daemon=True)
    t.start()
    return t


@pytest.mark.timeout(60)
def test_a_backup_waits_for_a_gc_holding_the_lease(bs):
    gc_lease = Lease(bs, REF, operation="gc")
    gc_lease.acquire()
    releaser = _release_later(gc_lease, 1.5)
    backup_lease = Lease(bs, REF, wait_for_gc=lease_mod.GC_WAIT_SECONDS)
    backup_lease.acquire()
    try:
        assert backup_lease.notice and "waited" in backup_lease.notice and "gc" in backup_lease.notice
        assert read_lease(bs, REF).operation == "backup"
    finally:
        backup_lease.release()
        releaser.join()


@pytest.mark.timeout(lease_mod.GC_WAIT_SECONDS / 2)  # the second wait would be GC_WAIT_SECONDS
def test_a_backup_gives_up_on_a_gc_after_the_wait_and_on_a_backup_at_once(bs):
    gc_lease = Lease(bs, REF, operation="gc")
    gc_lease.acquire()
    with pytest.raises(LockHeldError) as e:
        Lease(bs, REF, wait_for_gc=1.0).acquire()
    assert e.value.exit_code == 11 and "another gc" in str(e.value) and "waited" in str(e.value)
    gc_lease.release()

    other = Lease(bs, REF)
    other.acquire()
    with pytest.raises(LockHeldError) as e:
        Lease(bs, REF, wait_for_gc=lease_mod.GC_WAIT_SECONDS).acquire()
    assert "another backup" in str(e.value) and "waited" not in str(e.value)
    other.release()


@pytest.mark.timeout(lease_mod.GC_WAIT_SECONDS / 2)
def test_without_wait_a_gc_held_lease_fails_at_once(bs):
    """gc itself (and any caller that asks for no wait) keeps failing fast."""
    gc_lease = Lease(bs, REF, operation="gc")
    gc_lease.acquire()
    with pytest.raises(LockHeldError) as e:
        Lease(bs, REF, operation="gc").acquire()
    assert "another gc" in str(e.value) and "waited" not in str(e.value)
    gc_lease.release()


def _listing(bs: BlobStore) -> dict:
    return {i.key: (i.size, i.modified_at) for i in bs.list("")}


def test_preflight_refuses_what_acquire_refuses_and_writes_nothing(bs):
    """The dry run's check: a free, released or malformed lease passes; a live backup's is LockHeldError as
    acquire says it; a gc's is a note when the caller would wait for it, else refused as acquire refuses."""
    assert Lease(bs, REF, operation="copy").preflight() is None and _listing(bs) == {}
    holder = Lease(bs, REF)
    holder.acquire()
    before = _listing(bs)
    with pytest.raises(LockHeldError) as e:
        Lease(bs, REF, operation="copy", wait_for_gc=lease_mod.GC_WAIT_SECONDS).preflight()
    assert e.value.exit_code == 11 and "another backup" in str(e.value)
    holder.release()
    assert Lease(bs, REF, operation="copy").preflight() is None
    gc_lease = Lease(bs, REF, operation="gc")
    gc_lease.acquire()
    note = Lease(bs, REF, operation="copy", wait_for_gc=lease_mod.GC_WAIT_SECONDS).preflight()
    assert note and "gc" in note and "wait" in note
    with pytest.raises(LockHeldError, match="another gc"):
        Lease(bs, REF, operation="gc").preflight()
    gc_lease.release()
    bs.put_at(lease_key(REF), body("1e400"))  # malformed: binds nobody
    before = _listing(bs)
    assert Lease(bs, REF).preflight() is None and _listing(bs) == before


def test_preflight_refuses_a_read_only_blob_store_dir(tmp_path, small_disk):
    """A file:// blob store on a read-only mount: what the write of the lease would meet (exit 1), found
    with access(2), writing nothing."""
    import subprocess

    from statectl.errors import BlobStoreError

    d = small_disk(1)
    (d / "blobs").mkdir()
    subprocess.run(["mount", "-o", "remount,ro", str(d)], check=True)
    store = open_blobstore(f"file://{d / 'blobs'}", create=False)
    try:
        with pytest.raises(BlobStoreError, match="read-only file system") as e:
            Lease(store, REF).preflight()
        assert e.value.exit_code == 1
        with pytest.raises(BlobStoreError, match="Read-only file system"):
            Lease(store, REF).acquire()  # what the command meets
    finally:
        store.close()
