"""local.versions: builds beside the current version, sealed by a manifest, made current by an atomic link;
numbering (concurrent builds, at_least), dead builds removed, switch / prune, and readers of the old version
undisturbed by a switch. Real rocksdict stores in the versions."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from statectl.errors import NotFoundError, UsageError
from statectl.formats.adstore import MANIFEST, Digest, VersionManifest
from statectl.local.versions import (
    BUILDING,
    VersionBuild,
    current_version,
    list_versions,
    next_number,
    prune,
    remove_dead_builds,
    switch,
    versions_dir,
)


def manifest(number: int, entries: dict[bytes, bytes] | None = None) -> VersionManifest:
    d = Digest()
    d.add_sorted(sorted((entries or {}).items()))
    return VersionManifest(number, "/data/x.csv", len(entries or {}), d, "2026-01-01T00:00:00Z")


def write_store(path: Path, entries: dict[bytes, bytes]) -> None:
    import rocksdict

    db = rocksdict.Rdict(str(path), rocksdict.Options(raw_mode=True))
    try:
        for k, v in entries.items():
            db[k] = v
    finally:
        db.close()


def read_store(path: Path) -> dict[bytes, bytes]:
    import rocksdict

    db = rocksdict.Rdict(str(path), rocksdict.Options(raw_mode=True), access_type=rocksdict.AccessType.read_only())
    try:
        return dict(db.items())
    finally:
        db.close()


def build(store: Path, entries: dict[bytes, bytes], *, at_least: int = 1, make_current: bool = True) -> int:
    with VersionBuild(store, at_least=at_least) as b:
        write_store(b.path, entries)
        b.seal(manifest(b.number, entries))
    if make_current:
        switch(store, b.number)
    return b.number


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


@pytest.fixture
def store(tmp_path: Path) -> Path:
    (tmp_path / "members").mkdir()
    return tmp_path / "members" / "Partition_0"


def test_no_store_has_no_versions(store: Path):
    assert current_version(store) is None
    assert list_versions(store) == []
    assert next_number(store) == 1


def test_build_seal_switch(store: Path):
    with VersionBuild(store) as b:
        assert b.number == 1
        assert b.path.parent == versions_dir(store) and b.path.name.startswith(f"{BUILDING}1-{os.getpid()}-")
        assert list(b.path.iterdir()) == []
        write_store(b.path, {b"k": b"v1"})
        assert list_versions(store) == []  # an unsealed build is never listed...
        assert current_version(store) is None  # ...nor current
        final = b.seal(manifest(1, {b"k": b"v1"}))
    assert final == versions_dir(store) / "1" and not b.path.exists()
    assert VersionManifest.from_json((final / MANIFEST).read_text()) == manifest(1, {b"k": b"v1"})
    assert [v.number for v in list_versions(store)] == [1]
    assert current_version(store) is None  # sealed, not current until switched to
    assert not os.path.lexists(store)
    assert switch(store, 1) is None
    assert store.is_symlink() and os.readlink(store) == "Partition_0.versions/1"  # relative: the dir can move
    assert current_version(store) == 1
    assert read_store(store) == {b"k": b"v1"}
    [v] = list_versions(store)
    assert v.current and v.manifest == manifest(1, {b"k": b"v1"}) and v.problem is None
    # no link debris beside the store
    assert sorted(p.name for p in store.parent.iterdir()) == ["Partition_0", "Partition_0.versions"]


def test_second_version_and_switch_back_and_forth(store: Path):
    assert build(store, {b"k": b"v1"}) == 1
    assert build(store, {b"k": b"v2"}, make_current=False) == 2
    assert current_version(store) == 1 and read_store(store) == {b"k": b"v1"}
    assert switch(store, 2) == 1
    assert read_store(store) == {b"k": b"v2"}
    assert switch(store, 1) == 2
    assert read_store(store) == {b"k": b"v1"}
    assert [(v.number, v.current) for v in list_versions(store)] == [(1, True), (2, False)]
    assert next_number(store) == 3


def test_leaving_without_seal_removes_the_build(store: Path):
    build(store, {b"k": b"v1"})
    with VersionBuild(store) as b:
        write_store(b.path, {b"k": b"half"})
    assert not b.path.exists()
    with pytest.raises(RuntimeError), VersionBuild(store) as b:
        write_store(b.path, {b"k": b"half"})
        raise RuntimeError("the dataset is bad")
    assert not b.path.exists()
    assert sorted(p.name for p in versions_dir(store).iterdir()) == ["1"]
    assert current_version(store) == 1 and read_store(store) == {b"k": b"v1"}


def test_seal_refuses_a_manifest_of_another_version(store: Path):
    with VersionBuild(store) as b, pytest.raises(ValueError, match="manifest of version 2 sealing build 1"):
        b.seal(manifest(2))
    assert list_versions(store) == [] and list(versions_dir(store).iterdir()) == []


def test_numbers_are_above_every_version_and_build_in_progress(store: Path):
    build(store, {b"a": b"1"})
    with VersionBuild(store) as b2, VersionBuild(store) as b3:
        assert (b2.number, b3.number) == (2, 3)
        assert next_number(store) == 4
        b3.seal(manifest(3))
    assert next_number(store) == 4  # 2 was never sealed; 3 was
    assert [v.number for v in list_versions(store)] == [1, 3]
    with VersionBuild(store, at_least=7) as b:
        assert b.number == 7
    with VersionBuild(store, at_least=2) as b:
        assert b.number == 4  # at_least is a floor, never a number already taken


def test_a_dead_builds_dir_is_removed_by_the_next_build(store: Path):
    build(store, {b"a": b"1"})
    root = versions_dir(store)
    dead = root / f"{BUILDING}5-{dead_pid()}-deadbeef"
    dead.mkdir()
    write_store(dead, {b"a": b"killed"})
    live = root / f"{BUILDING}6-{os.getppid()}-0badf00d"  # the parent runs: its build is in progress
    live.mkdir()
    assert next_number(store) == 7
    assert list_versions(store) and [v.number for v in list_versions(store)] == [1]
    with VersionBuild(store) as b:
        assert not dead.exists() and live.exists()
        assert b.number == 7
        b.seal(manifest(7))
    remove_dead_builds(store)
    assert live.exists()
    assert sorted(p.name for p in root.iterdir()) == sorted(["1", "7", live.name])
    assert current_version(store) == 1


def test_switch_to_a_missing_or_unsealed_version(store: Path):
    build(store, {b"a": b"1"})
    with pytest.raises(NotFoundError, match=r"has no version 4 \(versions: 1\)"):
        switch(store, 4)
    (versions_dir(store) / "2").mkdir()  # a dir that looks like a version, with no manifest
    with pytest.raises(NotFoundError, match="version 2 of .* is not sealed") as e:
        switch(store, 2)
    assert e.value.exit_code == 10 and e.value.hint
    bad = versions_dir(store) / "3"
    bad.mkdir()
    (bad / MANIFEST).write_text('{"version": 3')
    with pytest.raises(NotFoundError, match="not sealed"):
        switch(store, 3)
    assert current_version(store) == 1 and read_store(store) == {b"a": b"1"}
    listed = {v.number: v for v in list_versions(store)}
    assert listed[2].manifest is None and listed[2].problem and listed[3].problem
    with pytest.raises(NotFoundError):
        switch(store.with_name("Partition_9"), 1)  # no versions at all


def test_a_plain_store_dir_is_refused(store: Path):
    write_store(store, {b"k": b"v"})
    with pytest.raises(UsageError, match="is a store dir, not a versioned adstore") as e:
        current_version(store)
    assert e.value.exit_code == 2
    with pytest.raises(UsageError):
        VersionBuild(store).__enter__()
    assert not versions_dir(store).exists()  # refused before anything was written
    with pytest.raises(UsageError):
        switch(store, 1)
    with pytest.raises(UsageError):
        list_versions(store)
    assert read_store(store) == {b"k": b"v"}


def test_a_link_elsewhere_is_refused(store: Path, tmp_path: Path):
    (tmp_path / "elsewhere").mkdir()
    store.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UsageError, match="not to a version in"):
        current_version(store)


def test_prune_keeps_the_newest_and_the_current(store: Path):
    for i in range(1, 6):
        build(store, {b"k": b"v%d" % i})
    assert prune(store, 2) == [1, 2, 3]
    assert [v.number for v in list_versions(store)] == [4, 5]
    switch(store, 4)  # a rollback: the current one is not the newest
    assert prune(store, 1) == []
    assert [(v.number, v.current) for v in list_versions(store)] == [(4, True), (5, False)]
    build(store, {b"k": b"v6"}, make_current=False)
    assert prune(store, 1) == [5]  # 6 is the newest, 4 is current
    assert read_store(store) == {b"k": b"v4"}
    assert next_number(store) == 7  # numbers are never reused
    with pytest.raises(UsageError, match="at least 1"):
        prune(store, 0)


def test_a_reader_of_the_old_version_keeps_reading_after_the_switch(store: Path):
    import rocksdict

    old = {b"k%03d" % i: b"old-%d" % i for i in range(200)}
    build(store, old)
    reader = rocksdict.Rdict(str(store), rocksdict.Options(raw_mode=True),
                             access_type=rocksdict.AccessType.read_only())
    try:
        new = {b"k%03d" % i: b"new-%d" % i for i in range(100, 300)}
        build(store, new)  # built, sealed and switched to while the reader has version 1 open
        assert current_version(store) == 2 and read_store(store) == new
        assert reader[b"k000"] == b"old-0"
        assert dict(reader.items()) == old
        assert prune(store, 1) == [1]  # even deleted, its open files stay readable
        assert not (versions_dir(store) / "1").exists()
        assert reader[b"k150"] == b"old-150" and dict(reader.items()) == old
    finally:
        reader.close()
    assert read_store(store) == new  # reopening the store dir gives the new version


def test_prune_counts_a_damaged_version_for_nothing(store: Path):
    for i in range(1, 4):
        build(store, {b"k": b"v%d" % i})
    (versions_dir(store) / "3" / MANIFEST).write_text("{ not json")  # the newest, damaged (not current: 3 is)
    switch(store, 2)
    assert prune(store, 1) == [1, 3]  # 2 is the newest sealed one and current; 3 can never be switched to
    assert [v.number for v in list_versions(store)] == [2]


def test_version_problem_cheap_and_deep_checks_and_switch_verification(store: Path):
    from statectl.errors import StatectlError
    from statectl.local.versions import version_problem

    entries = {b"k%03d" % i: b"v%d" % i for i in range(50)}
    build(store, entries)
    build(store, {b"k": b"v2"})
    v1 = versions_dir(store) / "1"
    m1 = VersionManifest.from_json((v1 / MANIFEST).read_text())
    assert version_problem(v1, m1, 1) is None and version_problem(v1, m1, 1, deep=True) is None
    assert "manifest is of version 1" in version_problem(v1, m1, 2)
    write_store(v1, {b"extra": b"x"})  # changed under its manifest: only the deep check sees it
    assert version_problem(v1, m1, 1) is None
    assert "51 keys" in version_problem(v1, m1, 1, deep=True)
    with pytest.raises(StatectlError, match="version 1 of .* is damaged: it holds 51 keys") as e:
        switch(store, 1)
    assert e.value.exit_code == 1 and e.value.hint and current_version(store) == 2
    assert switch(store, 1, verify="quick") == 2  # quick: a store that opens
    assert switch(store, 2, verify=None) == 1
    for p in v1.iterdir():
        if p.suffix == ".sst":
            p.unlink()
    assert "no SST file" in version_problem(v1, m1, 1)
    (v1 / "CURRENT").unlink()
    assert "CURRENT" in version_problem(v1, m1, 1)
    assert {v.number: v.problem is not None for v in list_versions(store)} == {1: True, 2: False}
    for verify in ("deep", "quick"):  # (None trusts the caller: a build it has just sealed)
        with pytest.raises(StatectlError, match="damaged"):
            switch(store, 1, verify=verify)
    assert current_version(store) == 2


def test_store_lock_one_holder_at_a_time(store: Path):
    from statectl.errors import LockHeldError
    from statectl.local.versions import StoreLock, lock_path

    assert lock_path(store).name == "Partition_0.adstore.lock" and "Partition_0-" not in lock_path(store).name
    with StoreLock(store):
        with pytest.raises(LockHeldError, match=f"locked by process {os.getpid()}") as e:
            StoreLock(store).__enter__()
        assert e.value.exit_code == 11 and e.value.hint
    with StoreLock(store):  # released on leaving the block
        pass
    assert lock_path(store).read_text().strip() == str(os.getpid())
