"""The state dir's probe for ``statectl doctor``: it exists or can be created, takes a file and a hard link
to it (RocksDB checkpoints and restores hard-link files), how much room is left, and whether the files
statectl makes there are the dir owner's (run as root they are given to it: fsutil.chown_tree)."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

from statectl.fsutil import owner_of
from statectl.probe import FAIL, OK, SKIP, Check

STATE_DIR = "state dir"
NAMES = (STATE_DIR,)


def probe(state_dir: Path | str | None) -> list[Check]:
    """The ``state dir`` check, as a one-item list (skipped without a dir). Never raises. Whatever it
    creates, the dir itself and its missing parents included, it removes again."""
    return [_check(state_dir)]


def _check(state_dir: Path | str | None) -> Check:
    if state_dir is None:
        return Check(STATE_DIR, SKIP, "no --state-dir given")
    path = Path(state_dir)
    if path.exists() and not path.is_dir():
        return Check(STATE_DIR, FAIL, f"{path} is not a directory", "pass the job's state base dir as --state-dir")
    missing: list[Path] = []
    p = path
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    if missing and not p.is_dir():
        return Check(STATE_DIR, FAIL, f"{path} does not exist and cannot be created: {p} is not a directory",
                     "pass the job's state base dir as --state-dir")
    try:
        dirs: tuple[int, int] | None = owner_of(path)  # before the probe makes any missing dir
    except OSError:
        dirs = None
    tried = _write_and_link(path, missing)
    if isinstance(tried, Check):
        return tried
    made, free = tried
    created = " (does not exist yet; can be created)" if missing else ""
    return _owned(f"{path} writable, hard links work, {_size(free)} free{created}", (made.st_uid, made.st_gid), dirs)


def _write_and_link(path: Path, missing: list[Path]) -> Check | tuple[os.stat_result, int]:
    """Make the ``missing`` dirs (deepest last), a probe file and a hard link to it, then remove them all;
    the probe file's stat and the free space, or the failed check."""
    probe_file = path / f".statectl-doctor-{uuid.uuid4().hex[:12]}"
    link = probe_file.with_name(probe_file.name + ".link")
    step = "create"
    try:
        if missing:
            path.mkdir(parents=True)
        step = "write"
        with open(probe_file, "xb") as f:
            f.write(b"statectl doctor\n")
            f.flush()
            os.fsync(f.fileno())
        step = "link"
        os.link(probe_file, link)
        return os.stat(probe_file), shutil.disk_usage(path).free
    except OSError as e:
        reason = e.strerror or str(e)
        if step == "create":
            return Check(STATE_DIR, FAIL, f"{path} does not exist and cannot be created: {reason}",
                         "create it with the job's user and permissions, or fix --state-dir")
        if step == "write":
            return Check(STATE_DIR, FAIL, f"{path} is not writable: {reason}",
                         "run statectl as the job's user, or fix the dir's owner and permissions")
        return Check(STATE_DIR, FAIL, f"hard links do not work in {path}: {reason}",
                     "RocksDB checkpoints and restores hard-link files; put the state dir on a local filesystem")
    finally:
        for f in (link, probe_file):
            try:
                f.unlink()
            except OSError:
                pass
        for d in missing:  # deepest first
            try:
                d.rmdir()
            except OSError:
                break


def _owned(detail: str, mine: tuple[int, int], dirs: tuple[int, int] | None) -> Check:
    """OK, with a warning when the files statectl makes are not the dir owner's (and it cannot give them)."""
    if os.geteuid() != 0 and dirs is not None and mine != dirs:
        owner = _names(*dirs).split(":")[0]
        return Check(STATE_DIR, OK, f"{detail}; but the files statectl makes there are {_names(*mine)}'s, not the "
                     f"dir owner's ({_names(*dirs)}): the job may not be able to write or restore them",
                     "run statectl as root" if dirs[0] == 0 else
                     f"run statectl as {owner} (the dir's owner), or as root, which gives what it makes to {owner}")
    return Check(STATE_DIR, OK, detail)


def _names(uid: int, gid: int) -> str:
    from statectl.snapshot.diff import group_name, owner_name

    return f"{owner_name(uid)}:{group_name(gid)}"


def _size(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
