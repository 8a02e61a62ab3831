"""The ``s3://bucket/prefix`` blob store (boto3), for AWS S3 and S3-compatible stores.

TTL is an object tag (``statectl-ttl=pending`` plus ``statectl-expires=<epoch s>``), so both
``statectl gc`` and a bucket lifecycle rule filtered on the tag can expire uncommitted blobs;
``remove_ttl`` deletes the tags. Blobs larger than the part size go up as multipart uploads. Every
object written (put, put_at, copy) carries the server-side encryption of S3Options.sse.
botocore's own retries are off: RetryingBlobStore does them, for every backend alike (the client is
made in statectl/blobstore/s3client.py).

Every request is bounded in time whatever the endpoint does: statectl/blobstore/deadlines.py holds the
rules and the watchdog; this store wraps each request in ``_deadline`` and names the endpoint when one
is overdue.
"""

from __future__ import annotations

import errno
import math
import os
import time
from contextlib import closing
from typing import TYPE_CHECKING, Any, BinaryIO, Iterable, Iterator
from urllib.parse import urlencode, urlparse

from statectl.blobstore.base import BlobInfo, key_batches, new_blob_key, innermost
from statectl.blobstore.deadlines import MIN_PROGRESS_BYTES, Attempt, BoundedBody, Deadline, install_deadlines
from statectl.blobstore.s3body import http_response, read_into
from statectl.blobstore.s3client import new_client
from statectl.errors import (
    AuthError,
    BlobNotFoundError,
    BlobStoreError,
    BlobStoreMissingError,
    DiskFullError,
    PreconditionFailedError,
    StatectlError,
    TransientBlobStoreError,
    UsageError,
)

if TYPE_CHECKING:
    from statectl.blobstore import S3Options

TTL_TAG = "statectl-ttl"
EXPIRES_TAG = "statectl-expires"
READ_BUF = 1024 * 1024
MAX_PARTS = 10_000
MAX_DELETE_KEYS = 1000  # keys per DeleteObjects request: S3's limit
_NO_ANSWER_HINT = ("the endpoint does not answer in time: check --s3-endpoint and that the store is up; "
                   "STATECTL_TIMEOUT and STATECTL_RETRY_TIME set how long statectl waits")
_SSE_HINT = "the store may not support the server-side encryption asked for: check sse and sse_kms_key_id"

_NOT_FOUND = {"NoSuchKey", "404", "NotFound", "NoSuchUpload"}
_AUTH = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403", "ExpiredToken",
         "InvalidToken", "AuthorizationHeaderMalformed", "InvalidClientTokenId"}
_TRANSIENT = {"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "RequestTimeTooSkewed",
              "InternalError", "ServiceUnavailable", "503", "500", "502", "504", "RequestLimitExceeded",
              "BadDigest", "IncompleteBody", "XAmzContentSHA256Mismatch"}


def _precondition_failed(e: Exception) -> bool:
    from botocore.exceptions import ClientError

    if not isinstance(e, ClientError):
        return False
    code = str(e.response.get("Error", {}).get("Code", ""))
    status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    # 409 ConditionalRequestConflict: a concurrent conditional write to the same key on AWS.
    return code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412)


def _network_error(e: Exception) -> bool:
    """True for the socket and urllib3 errors botocore may wrap in HTTPClientError."""
    from urllib3.exceptions import HTTPError as Urllib3Error

    return isinstance(e, (OSError, Urllib3Error))



def endpoint_identity(endpoint_url: str | None) -> str:
    """An endpoint URL as a comparable string: scheme and host in lower case, the scheme's default port and a
    trailing ``/`` dropped ("" for none: AWS, where a bucket name is global)."""
    if not endpoint_url:
        return ""
    u = urlparse(endpoint_url.strip())
    scheme, netloc = u.scheme.lower(), u.netloc.lower()
    default = {"http": ":80", "https": ":443"}.get(scheme)
    if default and netloc.endswith(default):
        netloc = netloc[:-len(default)]
    return f"{scheme}://{netloc}{u.path.rstrip('/')}"


def normalised_prefix(prefix: str) -> str:
    """A key prefix without empty or ``.`` segments ("a//b/./c/" -> "a/b/c"). An S3-compatible store that
    keeps a directory tree (SeaweedFS) files "a//b/k" as "a/b/k"; AWS keeps them apart, so two stores this
    calls one may be two there: comparing them errs on the side of "the same store"."""
    return "/".join(p for p in prefix.split("/") if p not in ("", "."))


class _Sink:
    """A download's destination: local write time is not the endpoint's (the attempt pauses), a full
    disk is a DiskFullError, and any other error of the sink's own (a cancelled transfer) is kept in
    ``error`` so that it reaches the caller as it is. ``into``: the destination takes bytes read straight
    into its buffer (``recv_buffer``/``received``, see blobstore.s3body)."""

    def __init__(self, dst: BinaryIO, key: str):
        self._dst, self._key = dst, key
        self.att: Attempt | None = None
        self.error: Exception | None = None
        self.into = callable(getattr(dst, "recv_buffer", None)) and callable(getattr(dst, "received", None))

    def write(self, chunk: bytes) -> None:
        self._local(self._dst.write, chunk)

    def recv_buffer(self) -> memoryview:
        return self._dst.recv_buffer()  # type: ignore[attr-defined]

    def received(self, n: int) -> None:
        self._local(self._dst.received, n)  # type: ignore[attr-defined]

    def _local(self, fn: Any, arg: Any) -> None:
        assert self.att is not None
        self.att.pause()
        try:
            fn(arg)
        except OSError as e:  # the local side, not the network: never transient
            if e.errno == errno.ENOSPC:
                raise DiskFullError(f"s3: get {self._key}: no space left writing the download") from e
            raise BlobStoreError(f"s3: get {self._key}: writing the download: {e}") from e
        except Exception as e:
            self.error = e
            raise
        finally:
            self.att.resume()


class S3BlobStore:
    """BlobStore on an S3 bucket under a key prefix."""

    root = None  # no local dir (``file://`` stores have one)
    delete_batch = MAX_DELETE_KEYS
    mtime_grain_s = 1.0  # LastModified: whole seconds, truncated

    def __init__(self, bucket: str, prefix: str, options: "S3Options", url: str):
        self.bucket = bucket
        self.prefix = f"{prefix}/" if prefix else ""
        self.url = url
        self.part_size = max(5 * 1024 * 1024, options.part_size)
        # S3 caps CopyObject at 5 GiB and a part at 5 GiB (at least 5 MiB but the last).
        self.copy_threshold = min(max(5 * 1024 * 1024, options.copy_threshold), 5 * 1024 ** 3)
        self.copy_part_size = min(max(5 * 1024 * 1024, options.copy_part_size), 5 * 1024 ** 3)
        self.copy_parallelism = max(1, min(16, options.max_connections // 2))
        # Which stores this one can CopyObject from: one endpoint, one set of credentials.
        self.copy_domain = ("s3", options.endpoint_url or "", options.region or "", options.profile or "",
                            options.access_key_id or "")
        # The credentials are no part of what the store is: two identities reading one bucket read one store.
        self.identity = ("s3", endpoint_identity(options.endpoint_url), bucket, normalised_prefix(prefix))
        self.timeout_s = options.timeout_s
        # The encryption arguments of every request that makes an object; UploadPart and UploadPartCopy
        # take none (the upload's CreateMultipartUpload carries them), nor does a read (S3 decrypts).
        self._sse = {k: v for k, v in (("ServerSideEncryption", options.sse),
                                       ("SSEKMSKeyId", options.sse_kms_key_id)) if v}
        self._client = new_client(options)
        self.deadlines = install_deadlines(self._client)

    # -- helpers -----------------------------------------------------------------------------------

    def _key(self, key: str) -> str:
        return self.prefix + key

    def _deadline(self, op: str, key: str, *, bulk: bool = False) -> Deadline:
        """The time bound of one request (module doc): a whole metadata request, or a bulk transfer's progress."""
        return Deadline(self.timeout_s, bulk, lambda att: self._too_slow(op, key, att))

    def _too_slow(self, op: str, key: str, att: Attempt) -> TransientBlobStoreError:
        where = f"s3: {op} s3://{self.bucket}/{self._key(key)}"
        endpoint = self._client.meta.endpoint_url
        if att.why == "stalled":
            return TransientBlobStoreError(
                f"{where}: the transfer with {endpoint} stalled: less than {MIN_PROGRESS_BYTES // 1024} KiB in "
                f"{att.window:g}s", hint=_NO_ANSWER_HINT)
        limit = att.head_window if att.why == "head" else att.window
        return TransientBlobStoreError(f"{where}: no answer from {endpoint} within {limit:g}s", hint=_NO_ANSWER_HINT)

    def _pages(self, op: str, key: str, pages: Any) -> Iterator[Any]:
        """A paginator's pages, each request bounded."""
        it = iter(pages)
        while True:
            with self._deadline(op, key):
                page = next(it, None)
            if page is None:
                return
            yield page

    def _error(self, op: str, key: str, e: Exception) -> Exception:
        """Map a boto3/botocore exception to statectl's hierarchy, with context."""
        from botocore import exceptions as bx

        if isinstance(e, StatectlError):
            return e
        if isinstance(e, bx.HTTPClientError):
            # botocore wraps whatever a request body raised while it was being sent (a short source, a
            # cancelled transfer): that is the caller's error, not a network failure, and never transient.
            inner = e.kwargs.get("error")
            if isinstance(inner, Exception) and not _network_error(inner):
                return inner
        where = f"s3: {op} s3://{self.bucket}/{self._key(key)}"
        if isinstance(e, bx.ClientError):
            err = e.response.get("Error", {})
            code = str(err.get("Code", ""))
            status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            msg = err.get("Message") or code
            # HEAD errors have no body, so a missing bucket is a bare 404 there; and SeaweedFS answers
            # an anonymous PUT into a missing bucket with AccessDenied. Ask the bucket in both cases.
            if code == "NoSuchBucket" or (code in ("404", "NotFound", "AccessDenied") and self._bucket_missing()):
                return BlobStoreMissingError(f"s3: bucket {self.bucket!r} does not exist", url=self.url,
                                             hint="create it, or check --blobstore and --s3-endpoint")
            if code in _NOT_FOUND or status == 404:
                return BlobNotFoundError(f"{where}: not found")
            if code in _AUTH or status == 403:
                return AuthError(f"{where}: access denied ({code}: {msg})",
                                 hint="check the access key and secret (profile, AWS_* env or ~/.aws)")
            if code == "NotImplemented" or status == 501:  # never transient: what was asked is not there
                return BlobStoreError(f"{where}: {code or status} {msg}", hint=_SSE_HINT if self._sse else None)
            if code in _TRANSIENT or status >= 500 or status == 429:
                return TransientBlobStoreError(f"{where}: {code or status} {msg}")
            return BlobStoreError(f"{where}: {code} {msg}")
        if isinstance(e, (bx.NoCredentialsError, bx.PartialCredentialsError)):
            return AuthError(f"s3: no credentials for s3://{self.bucket}",
                             hint="set them in the profile, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or ~/.aws")
        if isinstance(e, (bx.ReadTimeoutError, bx.ConnectTimeoutError)):
            return TransientBlobStoreError(
                f"{where}: no answer from {self._client.meta.endpoint_url} within {self.timeout_s:g}s",
                hint=_NO_ANSWER_HINT)
        if isinstance(e, (bx.EndpointConnectionError, bx.ConnectionClosedError, bx.IncompleteReadError,
                          bx.ResponseStreamingError, bx.HTTPClientError)):
            return TransientBlobStoreError(f"{where}: {e}")
        if isinstance(e, (ConnectionError, TimeoutError)):
            return TransientBlobStoreError(f"{where}: {e}")
        return BlobStoreError(f"{where}: {e}")

    def _bucket_missing(self) -> bool:
        """True only when the server says the bucket does not exist; any other outcome is False."""
        from botocore import exceptions as bx

        try:
            with self._deadline("head bucket", ""):
                self._client.head_bucket(Bucket=self.bucket)
        except bx.ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            return code in ("404", "NoSuchBucket", "NotFound")
        except Exception:
            return False
        return False

    def _tagging(self, ttl_seconds: int | None) -> str | None:
        if ttl_seconds is None:
            return None
        return urlencode({TTL_TAG: "pending", EXPIRES_TAG: str(int(time.time()) + ttl_seconds)})

    # -- protocol ----------------------------------------------------------------------------------

    def put(self, src: BinaryIO, *, size: int, ttl_seconds: int | None) -> str:
        """Upload ``size`` bytes from ``src`` to a new key; multipart above the part size.

        A source with fewer than ``size`` bytes is a BlobStoreError (not retried); a failed multipart
        upload is aborted, so nothing is visible under the key.
        """
        if size < 0:
            raise UsageError(f"s3: put: negative size {size}")
        key = new_blob_key()
        tagging = self._tagging(ttl_seconds)
        extra = {**self._sse, **({"Tagging": tagging} if tagging else {})}
        where = f"s3: put s3://{self.bucket}/{self._key(key)}"
        try:
            if size <= self.part_size:
                with self._deadline("put", key, bulk=True) as att:
                    self._client.put_object(Bucket=self.bucket, Key=self._key(key),
                                            Body=BoundedBody(src, size, where, att), ContentLength=size, **extra)
            else:
                self._multipart(key, src, size, extra, where)
        except Exception as e:
            raise self._error("put", key, e) from e
        return key

    def _multipart(self, key: str, src: BinaryIO, size: int, extra: dict[str, str], where: str) -> None:
        # S3 allows at most 10,000 parts: grow the part size for huge blobs rather than fail at part 10,001.
        part_size = max(self.part_size, math.ceil(size / MAX_PARTS))
        base = src.tell()
        with self._deadline("create upload", key):
            upload = self._client.create_multipart_upload(Bucket=self.bucket, Key=self._key(key), **extra)
        upload_id = upload["UploadId"]
        try:
            parts = []
            offset, number = 0, 1
            while offset < size:
                n = min(part_size, size - offset)
                # Position explicitly: how far botocore read the previous part's body is its business.
                src.seek(base + offset)
                with self._deadline(f"put part {number}", key, bulk=True) as att:
                    resp = self._client.upload_part(Bucket=self.bucket, Key=self._key(key), UploadId=upload_id,
                                                    PartNumber=number, Body=BoundedBody(src, n, where, att),
                                                    ContentLength=n)
                parts.append({"ETag": resp["ETag"], "PartNumber": number})
                offset += n
                number += 1
            with self._deadline("complete upload", key):
                self._client.complete_multipart_upload(Bucket=self.bucket, Key=self._key(key), UploadId=upload_id,
                                                       MultipartUpload={"Parts": parts})
            src.seek(base + size)
        except BaseException:
            try:
                with self._deadline("abort upload", key):
                    self._client.abort_multipart_upload(Bucket=self.bucket, Key=self._key(key), UploadId=upload_id)
            except Exception:
                pass  # an orphaned upload is reclaimed by the bucket's abort-incomplete rule or gc
            raise

    def put_at(self, key: str, data: bytes, *, if_match: str | None = None, if_none_match: bool = False,
               durable: bool = True) -> str:
        # ``durable`` asks nothing of S3: every object it acknowledges is stored durably.
        extra: dict[str, str] = {}  # the conditions only: a failed one is a PreconditionFailedError
        if if_none_match:
            extra["IfNoneMatch"] = "*"
        if if_match is not None:
            extra["IfMatch"] = if_match
        try:
            with self._deadline("put", key):
                resp = self._client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, **extra,
                                               **self._sse)
        except Exception as e:
            if extra and _precondition_failed(e):
                raise PreconditionFailedError(f"s3: put s3://{self.bucket}/{self._key(key)}: "
                                              "the object changed since it was read") from e
            raise self._error("put", key, e) from e
        return resp["ETag"]

    def check_writable(self, key: str) -> None:
        # Beside ``key`` (a bucket policy on its prefix applies alike), never on it: a store that ignored
        # If-Match would write the probe, which is then deleted, and never clobber what ``key`` holds.
        probe = f"{key}.statectl-write-check-{os.urandom(4).hex()}"
        try:
            self.put_at(probe, b"", if_match='"statectl-no-such-etag"')
        except (PreconditionFailedError, BlobNotFoundError):
            return
        self.delete([probe])

    def read_at(self, key: str) -> tuple[bytes, str]:
        try:
            with self._deadline("get", key):
                resp = self._client.get_object(Bucket=self.bucket, Key=self._key(key))
                with closing(resp["Body"]) as body:
                    data = body.read()
        except Exception as e:
            raise self._error("get", key, e) from e
        return data, resp["ETag"]

    def get(self, key: str, dst: BinaryIO, *, start: int = 0, length: int | None = None) -> int:
        """Download ``[start, start+length)`` into ``dst``, clipped to the object's end like a file read.

        Raises BlobNotFoundError; a body shorter than announced is a TransientBlobStoreError, a server
        that ignores the Range header a BlobStoreError.
        """
        if start < 0 or (length is not None and length < 0):
            raise UsageError(f"s3: get {key}: negative start or length ({start}, {length})")
        if length == 0:
            try:  # nothing to read, but a missing object must still be reported
                with self._deadline("get", key):
                    self._client.head_object(Bucket=self.bucket, Key=self._key(key))
            except Exception as e:
                raise self._error("get", key, e) from e
            return 0
        rng = None
        if start or length is not None:
            rng = f"bytes={start}-{'' if length is None else start + length - 1}"
        sink = _Sink(dst, key)
        try:
            with self._deadline("get", key, bulk=True) as att:
                sink.att = att
                written, expected = self._download(key, rng, start, sink)
        except Exception as e:
            if e is sink.error:
                raise
            raise self._error("get", key, e) from e
        if expected is not None and written != expected:
            raise TransientBlobStoreError(f"s3: get s3://{self.bucket}/{self._key(key)}: body truncated "
                                          f"({written} of {expected} bytes)")
        return written

    def _download(self, key: str, rng: str | None, start: int, sink: "_Sink") -> tuple[int, int | None]:
        """One GetObject into ``sink``: the bytes written and the length the server announced."""
        from botocore.exceptions import ClientError

        try:
            resp = self._client.get_object(Bucket=self.bucket, Key=self._key(key), **({"Range": rng} if rng else {}))
        except ClientError as e:
            # 416: the range starts at or past the end (or the object is empty): zero bytes, as a file read.
            if e.response.get("Error", {}).get("Code") == "InvalidRange":
                return 0, None
            raise
        body = resp["Body"]
        written = 0
        try:
            if rng and not str(resp.get("ContentRange", "")).startswith(f"bytes {start}-"):
                raise BlobStoreError(f"s3: get s3://{self.bucket}/{self._key(key)}: server ignored the "
                                     f"range {rng} (Content-Range {resp.get('ContentRange')!r})")
            fp = http_response(body) if sink.into else None
            if fp is not None:
                written = read_into(body, fp, sink, self._client.meta.endpoint_url)
            else:
                while chunk := body.read(READ_BUF):
                    sink.write(chunk)
                    written += len(chunk)
        finally:
            body.close()
        return written, resp.get("ContentLength")

    def delete(self, keys: Iterable[str]) -> None:
        """One DeleteObjects request per ``delete_batch`` keys; missing keys are not errors."""
        for batch in key_batches(keys, self.delete_batch):
            try:
                with self._deadline("delete", batch[0]):
                    resp = self._client.delete_objects(
                        Bucket=self.bucket, Delete={"Objects": [{"Key": self._key(k)} for k in batch], "Quiet": True})
            except Exception as e:
                raise self._error("delete", batch[0], e) from e
            errors = [x for x in resp.get("Errors", []) if x.get("Code") != "NoSuchKey"]
            if errors:
                raise BlobStoreError(f"s3: delete {errors[0].get('Key')}: {errors[0].get('Code')} {errors[0].get('Message')}")

    def remove_ttl(self, key: str) -> None:
        # One request: DeleteObjectTagging answers NoSuchKey for a missing object (AWS and SeaweedFS; the
        # conformance suite checks it), so no HEAD first. Half the requests of a cleanup of many small files.
        try:
            with self._deadline("remove_ttl", key):
                self._client.delete_object_tagging(Bucket=self.bucket, Key=self._key(key))
        except Exception as e:
            raise self._error("remove_ttl", key, e) from e

    def copy(self, key: str, *, ttl_seconds: int | None, source: Any = None, size: int | None = None) -> str:
        """CopyObject from ``source``'s bucket and prefix (default: this store's) to a new key here, with the
        TTL tags replaced by this copy's and this store's encryption (not the source's); above
        ``copy_threshold`` a multipart upload whose parts are UploadPartCopy requests of ``copy_part_size``
        bytes, ``copy_parallelism`` at a time (a failed one is aborted: nothing shows under the new key).
        Without ``size``: one CopyObject (S3 takes up to 5 GiB)."""
        origin = innermost(source) if source is not None else self
        if not isinstance(origin, S3BlobStore) or origin.copy_domain != self.copy_domain:
            raise UsageError(f"s3: copy {key}: {getattr(source, 'url', source)} is not on this store's endpoint; "
                             "stream it through the client")
        src = {"Bucket": origin.bucket, "Key": origin._key(key)}
        new_key = new_blob_key()
        tagging = self._tagging(ttl_seconds)
        try:
            if size is None or size <= self.copy_threshold:
                with self._deadline("copy", key):
                    self._client.copy_object(Bucket=self.bucket, Key=self._key(new_key), CopySource=src,
                                             TaggingDirective="REPLACE", Tagging=tagging or "", **self._sse)
            else:
                self._multipart_copy(new_key, src, size, {**self._sse, **({"Tagging": tagging} if tagging else {})})
        except Exception as e:
            raise self._error("copy", key, e) from e
        return new_key

    def _multipart_copy(self, key: str, src: dict[str, str], size: int, extra: dict[str, str]) -> None:
        from concurrent.futures import ThreadPoolExecutor

        part_size = max(self.copy_part_size, math.ceil(size / MAX_PARTS))
        with self._deadline("create upload", key):
            upload_id = self._client.create_multipart_upload(Bucket=self.bucket, Key=self._key(key),
                                                             **extra)["UploadId"]
        ranges = [(n + 1, off, min(off + part_size, size) - 1) for n, off in enumerate(range(0, size, part_size))]

        def copy_part(part: tuple[int, int, int]) -> dict[str, Any]:
            number, first, last = part
            with self._deadline(f"copy part {number}", key):
                resp = self._client.upload_part_copy(Bucket=self.bucket, Key=self._key(key), UploadId=upload_id,
                                                     PartNumber=number, CopySource=src,
                                                     CopySourceRange=f"bytes={first}-{last}")
            return {"ETag": resp["CopyPartResult"]["ETag"], "PartNumber": number}

        try:
            with ThreadPoolExecutor(min(self.copy_parallelism, len(ranges)),
                                    thread_name_prefix="statectl-copy") as pool:
                parts = list(pool.map(copy_part, ranges))
            with self._deadline("complete upload", key):
                self._client.complete_multipart_upload(Bucket=self.bucket, Key=self._key(key), UploadId=upload_id,
                                                       MultipartUpload={"Parts": parts})
        except BaseException:
            try:
                with self._deadline("abort upload", key):
                    self._client.abort_multipart_upload(Bucket=self.bucket, Key=self._key(key), UploadId=upload_id)
            except Exception:
                pass  # an orphaned upload is reclaimed by the bucket's abort-incomplete rule or gc
            raise

    def stat(self, key: str) -> BlobInfo:
        try:
            with self._deadline("stat", key):
                head = self._client.head_object(Bucket=self.bucket, Key=self._key(key))
            with self._deadline("stat", key):
                tagging = self._client.get_object_tagging(Bucket=self.bucket, Key=self._key(key))
            tags = {t["Key"]: t["Value"] for t in tagging.get("TagSet", [])}
        except Exception as e:
            raise self._error("stat", key, e) from e
        expires = None
        if TTL_TAG in tags or EXPIRES_TAG in tags:
            try:
                expires = float(tags.get(EXPIRES_TAG, "0"))
            except ValueError:
                expires = 0.0
        return BlobInfo(key, head["ContentLength"], head["LastModified"].timestamp(), expires)

    def list(self, prefix: str = "", *, start_after: str | None = None) -> Iterator[BlobInfo]:
        """One ListObjectsV2 request per page (up to a thousand objects), sent as the caller consumes the
        previous page. TTLs are not in a listing: ``ttl_known`` is False (``stat`` reads them)."""
        paginator = self._client.get_paginator("list_objects_v2")
        kwargs = {"StartAfter": self._key(start_after)} if start_after is not None else {}
        try:
            for page in self._pages("list", prefix, paginator.paginate(Bucket=self.bucket, Prefix=self._key(prefix),
                                                                       **kwargs)):
                for obj in page.get("Contents", []):
                    yield BlobInfo(obj["Key"][len(self.prefix):], obj["Size"], obj["LastModified"].timestamp(),
                                   None, ttl_known=False)
        except Exception as e:
            raise self._error("list", prefix, e) from e

    def sweep_debris(self, older_than: float, *, dry_run: bool = False) -> list[BlobInfo]:
        """Abort the incomplete multipart uploads of blobs (``put`` aborts its own on failure; a killed
        process cannot) initiated before ``older_than``. Their parts are invisible to listings but
        billed. Only uploads under this store's ``blobs/``: nothing else of the bucket is touched."""
        found: list[BlobInfo] = []
        where = self._key("blobs/")
        try:
            paginator = self._client.get_paginator("list_multipart_uploads")
            for page in self._pages("list uploads", "blobs/", paginator.paginate(Bucket=self.bucket, Prefix=where)):
                for upload in page.get("Uploads", []):
                    initiated = upload["Initiated"].timestamp()
                    if initiated >= older_than:
                        continue
                    key = upload["Key"][len(self.prefix):]
                    if not dry_run:
                        try:
                            with self._deadline("abort upload", key):
                                self._client.abort_multipart_upload(Bucket=self.bucket, Key=upload["Key"],
                                                                    UploadId=upload["UploadId"])
                        except Exception as e:
                            err = self._error("abort upload", key, e)
                            if not isinstance(err, BlobNotFoundError):  # NoSuchUpload: aborted meanwhile
                                raise err from e
                    found.append(BlobInfo(key, 0, initiated))
        except StatectlError:
            raise
        except Exception as e:
            raise self._error("list uploads", "blobs/", e) from e
        return found

    def close(self) -> None:
        self._client.close()
