"""Every default a user can override, in one table: config.KEYS (and so ``--help``, man pages and
``statectl config show``) and the engine's options dataclasses both read them from here."""

from __future__ import annotations

JOB_ID = "1"
TASK = "Partition 0"
PARALLELISM = 8  # transfers in flight
CHUNK_SIZE = 64 * 1024 * 1024  # bytes per uploaded blob of a large file
TTL_SECONDS = 30 * 24 * 3600  # how long an uncommitted blob lives
KEEP_LAST = 1  # snapshots kept restorable per task/store
GRACE_SECONDS = 6 * 3600  # how long unreferenced blobs, and those of snapshots retention dropped, stay
RETRIES = 8  # retries of a transient blob store error
TIMEOUT_S = 15  # how long the blob store may leave a connection or read unanswered
RETRY_TIME_S = 60  # no retry starts later than this after a request's first attempt
