"""What every task of the Spark build needs, on the driver and the executors: the job's context
(:class:`BuildJob`: the spec, where the files go, how to reach Kafka and the blob store), the error that ends
the build (:class:`BuildError`), and the helpers that name where a row is."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from statectl.spark.submit import BuildSpec


class BuildError(Exception):
    """A row, record or read the build cannot get past; the message names where it is."""


class BuildJob:
    """What every task needs: the spec, where files go, and how to reach Kafka and the blob store (without
    secrets: the executors take those from their environment)."""

    def __init__(self, doc: dict[str, Any]):
        self.spec = BuildSpec.from_dict(doc["spec"])
        self.spec_hash: str = doc["spec_hash"]
        self.build_id: str = doc["build_id"]
        self.out_dir = Path(doc["out_dir"])
        self.s3: dict[str, Any] | None = doc.get("s3")
        self.kafka_security: dict[str, Any] | None = doc.get("kafka_security")
        self.stores = self.spec.stores()
        self.store_index = {s: i for i, s in enumerate(self.stores)}

    def security(self) -> Any:
        if not self.kafka_security:
            return None
        from statectl.kafka.client import KafkaSecurity

        return KafkaSecurity(**self.kafka_security, sasl_password=os.environ.get("STATECTL_KAFKA_SASL_PASSWORD"),
                             ssl_password=os.environ.get("STATECTL_KAFKA_SSL_PASSWORD"))

    def blobstore(self, url: str | None = None) -> Any:
        """The staging blob store, or the one at ``url`` (a rescale's source snapshots)."""
        from statectl.blobstore import S3Options, open_blobstore

        url = url or self.spec.staging
        s3 = None
        if url.startswith("s3://"):
            s3 = S3Options(**(self.s3 or {}), access_key_id=os.environ.get("STATECTL_S3_ACCESS_KEY_ID"),
                           secret_access_key=os.environ.get("STATECTL_S3_SECRET_ACCESS_KEY"),
                           session_token=os.environ.get("STATECTL_S3_SESSION_TOKEN"))
        return open_blobstore(url, s3=s3)


def local_path(uri: str) -> str:
    parsed = urlparse(uri)
    return os.path.abspath(unquote(parsed.path)) if parsed.scheme in ("", "file") else uri


def row_at(what: str, block: int, n: int) -> str:
    # Rows are numbered from the start of the file only when the split starts there.
    return f"{what} {n}" if block == 0 else f"{what} {n} of the split at byte {block}"


def one_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
