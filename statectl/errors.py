"""One error hierarchy for statectl; every class carries its process exit code and an optional hint.

The exit codes are the scripting contract (CLI.md): ``EXIT_CODES`` below is the one table of them. The root
``--help``, each command's "Exit codes:" line and the EXIT STATUS section of statectl(1) are generated from
it (statectl.cli.base.exit_codes_epilog, tools/docs.py). An unknown code means failure.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence, Union

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_PARTIAL = 3
EXIT_NOT_FOUND = 10
EXIT_LOCKED = 11
EXIT_AUTH = 12
EXIT_MISSING_DEPENDENCY = 13
EXIT_DISCARDED = 14
EXIT_INTERRUPTED = 130  # Ctrl-C, SIGTERM, SIGHUP: the CLI maps KeyboardInterrupt to it (statectl.cli.main)


@dataclass(frozen=True)
class ExitCode:
    """One documented exit code: ``name`` is its short name in help texts ("not found"), ``meaning`` the
    sentence statectl(1) gives it."""

    code: int
    name: str
    meaning: str


EXIT_CODES: tuple[ExitCode, ...] = (
    ExitCode(EXIT_OK, "ok", "ok (diff: the same)."),
    ExitCode(EXIT_FAILURE, "failure", "failure (diff: different; snapshots verify: problems found), e.g. a corrupt "
                                      "snapshot, a CRC mismatch, a full disk, a blob store error."),
    ExitCode(EXIT_USAGE, "usage", "usage: bad flags or arguments, a bad config file or value, an unsafe target."),
    ExitCode(EXIT_PARTIAL, "partial", "partial: some stores of backup --all failed; adstore load "
                                      "--dataset-versions refused an end-of-dataset marker (the rest loaded); "
                                      "rescale committed some targets, then a commit failed."),
    ExitCode(EXIT_NOT_FOUND, "not found", "not found: snapshot, checkpoint, store dir, bucket."),
    ExitCode(EXIT_LOCKED, "lock held", "lock held: the store is open in a running process, or another backup holds "
                                       "its lease."),
    ExitCode(EXIT_AUTH, "auth", "auth: the blob store rejected the credentials."),
    ExitCode(EXIT_MISSING_DEPENDENCY, "missing dependency", "missing dependency: a package or program this operation "
                                                            "needs is not installed."),
    ExitCode(EXIT_DISCARDED, "discarded", "discarded: refused, nothing changed, because the job would delete or "
                                          "ignore what the command was to produce (standby promote: the job's "
                                          "restore mode, its latest checkpoint; drain start: the job runs no "
                                          "drain monitor); adstore status: the job's next start deletes some "
                                          "side-input store (stale, mismatched, or its container reads no "
                                          "checkpoint); adstore seal-checkpoint: a checkpoint would not keep "
                                          "the stores."),
    ExitCode(EXIT_INTERRUPTED, "interrupted", "interrupted (Ctrl-C); nothing is left half-written."),
)

_BY_CODE = {c.code: c for c in EXIT_CODES}


def exit_code(code: int) -> ExitCode:
    """The table's entry for ``code``; ValueError for a code that is not documented."""
    try:
        return _BY_CODE[code]
    except KeyError:
        raise ValueError(f"exit code {code} is not in statectl.errors.EXIT_CODES") from None


def describe_exit_codes(codes: Iterable[int | tuple[int, str]] | None = None,
                        meanings: Mapping[int, str] | None = None) -> str:
    """``0 ok, 1 failure, ...``: each code with its name from the table, or with the meaning given for it
    (a ``(code, meaning)`` item, or ``meanings[code]``). Without ``codes``: every code of the table.
    Raises ValueError for a code that is not in the table."""
    items = [c.code for c in EXIT_CODES] if codes is None else list(codes)
    parts = []
    for item in items:
        code, meaning = item if isinstance(item, tuple) else (item, (meanings or {}).get(item))
        entry = exit_code(code)  # a code given with its own meaning must be in the table too
        parts.append(f"{code} {meaning or entry.name}")
    return ", ".join(parts)


@dataclass(frozen=True)
class Command:
    """A statectl command a hint tells the operator to run: its command ``words`` (``("snapshots", "list")``)
    and its own ``args`` (options with their values, in order). The CLI completes it with the flags of the
    failing invocation that say where the state is (blob store, S3 endpoint, Kafka, ZooKeeper, job, task,
    store, state dir; --config and --profile), so that it addresses the same state; the same command as
    the invocation keeps all of its flags (statectl.cli.hints). ``without``: settings of the invocation the
    command must not take (a command that lists the jobs takes no --job). ``str()``: the command as given,
    which is what a Python caller reads in ``err.hint``."""

    words: tuple[str, ...]
    args: tuple[str, ...] = ()
    without: frozenset[str] = frozenset()

    def __str__(self) -> str:
        return shlex.join(["statectl", *self.words, *self.args])


def command(words: str, *args: str, without: Iterable[str] = ()) -> Command:
    """``command("snapshots list", "--job", job)``: the Command of these words and args."""
    return Command(tuple(words.split()), tuple(args), frozenset(without))


# A hint: text, or text and Commands in the order they are read.
Hint = Union[str, Sequence[Union[str, Command]]]


def quoted(text: str) -> str:
    """A command in a sentence: in single quotes, or in double ones when it holds a single quote itself."""
    return f'"{text}"' if "'" in text else f"'{text}'"


def render_hint(parts: Sequence[str | Command], complete=None) -> str:
    """The text of a hint's ``parts``, each Command quoted, after ``complete(command) -> str`` when given
    (else as it is given)."""
    return "".join(p if isinstance(p, str) else quoted(complete(p) if complete else str(p)) for p in parts)


class StatectlError(Exception):
    """Base of every error statectl reports to a user; ``str(err)`` is a one-line message. ``hint``: what to
    do about it, as text (its commands as given); ``hint_parts``: the same with its Commands, for the CLI to
    complete (statectl.cli.hints)."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, *, hint: Hint | None = None):
        super().__init__(message)
        self.hint = hint

    @property
    def hint(self) -> str | None:
        return render_hint(self.hint_parts) or None

    @hint.setter
    def hint(self, value: Hint | None) -> None:
        self.hint_parts: tuple[str | Command, ...] = (
            () if not value else (value,) if isinstance(value, str) else tuple(value))


class UsageError(StatectlError):
    """Bad flags or arguments: the command cannot run as asked."""

    exit_code = EXIT_USAGE


class ConfigError(UsageError):
    """A config file or setting is invalid; the message names the file and key."""


class PartialError(StatectlError):
    """Some of a multi-part operation succeeded and some failed (e.g. ``backup --all``)."""

    exit_code = EXIT_PARTIAL


def one_cause(errors: list[StatectlError], failures: int, done: int) -> StatectlError | None:
    """For an operation run over several stores (``backup --all``, ``restore --all``, ``snapshots copy
    --all``): the one error to raise when nothing was ``done``, every one of the ``failures`` is among
    ``errors`` (each store failed in its operation, none before it) and they all say the same (a missing
    blob store, bad credentials): said once, with its own exit code, rather than once per store. None when
    the run reports its results and failures instead (the CLI exits 3 for failures then)."""
    if errors and not done and len(errors) == failures and len({(type(e), str(e)) for e in errors}) == 1:
        return errors[0]
    return None


class NotFoundError(StatectlError):
    """Something named does not exist: a snapshot, a checkpoint, a store dir, a bucket."""

    exit_code = EXIT_NOT_FOUND


class SnapshotNotFoundError(NotFoundError):
    """No snapshot with that id, or no checkpoint for the task/store."""


class BlobStoreMissingError(NotFoundError):
    """The blob store itself is not there (a file:// dir, an S3 bucket); ``url``: the store's URL, so that a
    command with two stores (snapshots copy) can tell which one."""

    def __init__(self, message: str, *, hint: Hint | None = None, url: str = ""):
        super().__init__(message, hint=hint)
        self.url = url


class BlobNotFoundError(NotFoundError):
    """The blob store has no object under that id; every backend maps its own not-found to this."""


class LockHeldError(StatectlError):
    """The store is held open by another process (its RocksDB LOCK is taken)."""

    exit_code = EXIT_LOCKED


class AuthError(StatectlError):
    """The blob store rejected the credentials."""

    exit_code = EXIT_AUTH


class MissingDependencyError(StatectlError):
    """A package or program statectl needs for this operation is not installed."""

    exit_code = EXIT_MISSING_DEPENDENCY


class DiscardedError(StatectlError):
    """Refused before anything changed: what the command was to produce is what the job's next start
    deletes (e.g. a promoted standby dir under Samza's transactional or blob-store restore), or what the
    job ignores (a drain notification for a job without a drain monitor)."""

    exit_code = EXIT_DISCARDED


class BlobStoreError(StatectlError):
    """A blob store operation failed for a reason that retrying will not fix."""


class TransientBlobStoreError(BlobStoreError):
    """A blob store operation failed for a reason that may pass: throttling, 5xx, reset, timeout.

    Backends raise it; the retry wrapper retries it with backoff and jitter.
    """


class PreconditionFailedError(BlobStoreError):
    """A conditional write lost: the object was created or changed by someone else since it was read."""


class CorruptSnapshotError(StatectlError):
    """A snapshot is unusable: malformed index, unsafe names, missing or damaged blobs."""


class IndexFormatError(CorruptSnapshotError):
    """An index blob or file is not a valid Samza SnapshotIndex."""


class UnsafePathError(CorruptSnapshotError):
    """An index names a file or dir that would escape the target directory."""


class ChecksumMismatchError(CorruptSnapshotError):
    """Downloaded bytes do not have the CRC32 or size the index records."""


class NotAStoreError(StatectlError):
    """A directory that should hold a RocksDB store does not."""


class DiskFullError(StatectlError):
    """The local disk ran out of space; nothing existing was changed."""


def is_disk_full(e: BaseException | None) -> bool:
    """Whether ``e``, or an error it was raised from or while handling, says the disk is full: a
    DiskFullError, an OSError ENOSPC/EDQUOT, or RocksDB's own error for it ("IO error: No space left on
    device", or the quota's), which is no OSError. (A store whose write hit a full disk may fail its close
    with another error, raised while the first is handled.)"""
    import errno

    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, DiskFullError):
            return True
        if isinstance(e, OSError):
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                return True
        else:
            text = str(e).lower()
            if "no space left on device" in text or "disk quota exceeded" in text:
                return True
        e = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
    return False


class LeaseLostError(StatectlError):
    """Another process took over this store's lease (it expired, or 'lease break' broke it) while this
    operation held it: the operation stopped before it committed. Exit 1, a failure of this run, not 11:
    exit 11 says the operation could not start because someone held the store."""
