"""One error hierarchy for statectl; every class carries its process exit code and an optional hint.

Exit codes (the scripting contract, see CLI.md): 0 ok, 1 failure, 2 usage, 3 partial, 10 not found,
11 lock held, 12 auth, 13 missing dependency, 130 interrupted.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_PARTIAL = 3
EXIT_NOT_FOUND = 10
EXIT_LOCKED = 11
EXIT_AUTH = 12
EXIT_MISSING_DEPENDENCY = 13
EXIT_INTERRUPTED = 130


class StatectlError(Exception):
    """Base of every error statectl reports to a user; ``str(err)`` is a one-line message."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


class UsageError(StatectlError):
    """Bad flags or arguments: the command cannot run as asked."""

    exit_code = EXIT_USAGE


class ConfigError(UsageError):
    """A config file or setting is invalid; the message names the file and key."""


class PartialError(StatectlError):
    """Some of a multi-part operation succeeded and some failed (e.g. ``backup --all``)."""

    exit_code = EXIT_PARTIAL


class NotFoundError(StatectlError):
    """Something named does not exist: a snapshot, a checkpoint, a store dir, a bucket."""

    exit_code = EXIT_NOT_FOUND


class SnapshotNotFoundError(NotFoundError):
    """No snapshot with that id, or no checkpoint for the task/store."""


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


class OperationInterruptedError(StatectlError):
    """The operation was stopped by the user (Ctrl-C / SIGINT)."""

    exit_code = EXIT_INTERRUPTED


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


class LeaseLostError(StatectlError):
    """Another process took over this store's lease; this operation must not commit."""
