"""doctor: check what the operations need, and say in one line each what is wrong.

Checks, in order (the names are stable; JSON consumers key on them):

- ``blob store``: list, write, read back and delete a small record under ``doctor/`` (on S3 a
  create-only write of it again must lose: leases rely on conditional writes); write a blob with a
  TTL the way backup does (under ``blobs/``, where gc reclaims it should the doctor die), read it
  back, see its expiry in ``stat``, clear it with ``remove_ttl``, delete it.
- ``kafka``: with a bootstrap list, the brokers answer a metadata request within the timeout.
- ``checkpoint topic`` / ``coordinator topic``: with a job too, the job's Samza checkpoint topic and
  coordinator stream exist, with the single partition Samza needs.
- ``rocksdict``: open, write, read back and close a RocksDB store in a temporary dir.
- ``java`` / ``spark``: ``java -version`` runs and pyspark imports with its spark-submit; both are
  needed only by the Spark jobs, so they are skipped (not failed) while pyspark is not installed.
- ``state dir``: the job's state dir exists or can be created, takes a file and a hard link to it
  (RocksDB checkpoints and restores hard-link files), and how much room is left.

A check that has nothing to check (no ``--kafka``, no ``--state-dir``) is skipped. Every probe the
checks write is removed again; a probe blob left by a crash carries a TTL (gc reclaims it), and a
probe record left under ``doctor/`` is removed by the next doctor run once an hour old.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import io
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Union
from urllib.parse import urlparse

from statectl.blobstore.base import BlobStore
from statectl.errors import (
    AuthError,
    BlobNotFoundError,
    BlobStoreError,
    DiskFullError,
    MissingDependencyError,
    NotFoundError,
    PreconditionFailedError,
    StatectlError,
    TransientBlobStoreError,
    UsageError,
)

OK, FAIL, SKIP = "ok", "fail", "skip"
DOCTOR_PREFIX = "doctor/"
PROBE_TTL_SECONDS = 3600
# A probe record older than this was left by a doctor run that died; the next run removes it.
STALE_PROBE_SECONDS = 3600
# How far the expiry a store reports may stray from the one written (rounding to whole seconds, slow requests).
TTL_SLACK_SECONDS = 120
JAVA_TIMEOUT_S = 30.0

BLOB_STORE, KAFKA, CHECKPOINT_TOPIC, COORDINATOR_TOPIC = "blob store", "kafka", "checkpoint topic", "coordinator topic"
ROCKSDICT, JAVA, SPARK, STATE_DIR = "rocksdict", "java", "spark", "state dir"
CHECK_NAMES = (BLOB_STORE, KAFKA, CHECKPOINT_TOPIC, COORDINATOR_TOPIC, ROCKSDICT, JAVA, SPARK, STATE_DIR)

SPARK_HINT = "pip install pyspark (only the Spark jobs need it)"
JDK_HINT = "install a JDK 17 (e.g. apt-get install openjdk-17-jre-headless), or set JAVA_HOME to one"


@dataclass
class Check:
    """One check's outcome: ``status`` is ok, fail or skip; ``detail`` is one line; ``hint`` says what to do."""

    name: str
    status: str
    detail: str
    hint: str | None = None


@dataclass
class DoctorResult:
    """``ok`` is True when no check failed (skipped checks are fine)."""

    ok: bool
    checks: list[Check] = field(default_factory=list)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == FAIL]


@dataclass(frozen=True)
class DoctorOptions:
    """What to check. ``blobstore_url`` and ``s3_endpoint`` only label the blob store check (the store
    itself is handed to :func:`doctor`); the rest selects and configures the other checks."""

    blobstore_url: str
    s3_endpoint: str | None = None
    kafka: str | None = None
    job: str | None = None
    job_id: str = "1"
    state_dir: Path | None = None
    timeout_s: float = 5.0
    probe_ttl_seconds: int = PROBE_TTL_SECONDS

    def validate(self) -> None:
        """Raise UsageError for options no check could run with (before any check runs)."""
        if not self.timeout_s > 0:
            raise UsageError("--timeout must be more than 0 seconds")
        if self.probe_ttl_seconds < 60:
            raise UsageError("the probe TTL must be at least 60 seconds")
        if not self.job_id:
            raise UsageError("--job-id must not be empty")
        if self.kafka is not None and not [s for s in self.kafka.split(",") if s.strip()]:
            raise UsageError("no Kafka brokers given", hint="pass --kafka HOST:PORT[,HOST:PORT...]")
        if self.job:
            self.topics()

    def topics(self) -> tuple[str, str]:
        """The job's checkpoint and coordinator topic names. Raises UsageError when they are not legal."""
        from statectl.formats.checkpoint import checkpoint_topic
        from statectl.formats.coordinator import coordinator_topic

        assert self.job
        return checkpoint_topic(self.job, self.job_id), coordinator_topic(self.job, self.job_id)


BlobStoreSource = Union[BlobStore, Callable[[], BlobStore]]


def doctor(opts: DoctorOptions, blobstore: BlobStoreSource) -> DoctorResult:
    """Run every check (see the module doc) and return their outcomes, one per name in CHECK_NAMES order.

    ``blobstore`` is the store to probe, or a function that opens it (so that a store that cannot even
    be opened is reported as a failed check); the caller closes it. A failing check never stops the
    others. Raises UsageError for bad options, and when opening the blob store says its URL is bad:
    those are usage errors, not findings. Leaves nothing behind (see the module doc).
    """
    opts.validate()
    checks = [check_blobstore(opts, blobstore)]
    checks += check_kafka(opts)
    checks.append(check_rocksdict())
    pyspark_installed = importlib.util.find_spec("pyspark") is not None
    java, java_version = check_java(pyspark_installed)
    checks.append(java)
    checks.append(check_spark(pyspark_installed, java, java_version))
    checks.append(check_state_dir(opts.state_dir))
    return DoctorResult(ok=not any(c.status == FAIL for c in checks), checks=checks)


# -- blob store ------------------------------------------------------------------------------------


def check_blobstore(opts: DoctorOptions, blobstore: BlobStoreSource) -> Check:
    """Probe the blob store the way backup, the catalog and leases use it (see the module doc)."""
    parsed = urlparse(opts.blobstore_url)
    is_s3 = parsed.scheme == "s3"
    where = opts.blobstore_url + (f" at {opts.s3_endpoint}" if is_s3 and opts.s3_endpoint else "")
    payload = json.dumps({"probe": "statectl doctor", "host": socket.gethostname(), "pid": os.getpid(),
                          "created": int(time.time())}).encode()
    record = f"{DOCTOR_PREFIX}{uuid.uuid4().hex}"
    blob: str | None = None
    store: BlobStore | None = None
    answered = False  # the store has accepted a request: the credentials are good from here on
    step = "opening it"
    stale = 0
    discard = True
    try:
        store = blobstore() if callable(blobstore) else blobstore
        step = f"listing {DOCTOR_PREFIX}"
        probes = list(store.list(DOCTOR_PREFIX))
        answered = True
        stale = _remove_stale_probes(store, probes)

        step = f"writing the record {record}"
        store.put_at(record, payload)
        step = f"reading the record {record} back"
        data, _ = store.read_at(record)
        if data != payload:
            return Check(BLOB_STORE, FAIL, f"{where}: the record {record} read back differs from what was written "
                                           f"({len(data)} bytes instead of {len(payload)})")
        if is_s3:
            # file:// makes conditional writes atomic with a lock file of its own; S3-compatible stores may
            # ignore the condition, and then two backups of one store could both take its lease.
            step = "writing the record again, create-only"
            try:
                store.put_at(record, payload + b" ", if_none_match=True)
            except PreconditionFailedError:
                pass
            else:
                return Check(BLOB_STORE, FAIL, f"{where}: conditional writes are ignored: a create-only write "
                                               "replaced an existing object",
                             hint="backup's leases need conditional writes (S3 If-None-Match / If-Match); use a "
                                  "store that supports them")

        step = "writing a blob with a TTL"
        before = time.time()
        blob = store.put(io.BytesIO(payload), size=len(payload), ttl_seconds=opts.probe_ttl_seconds)
        after = time.time()
        step = f"reading the blob {blob} back"
        buf = io.BytesIO()
        store.get(blob, buf)
        if buf.getvalue() != payload:
            return Check(BLOB_STORE, FAIL, f"{where}: the blob {blob} read back differs from what was written "
                                           f"({len(buf.getvalue())} bytes instead of {len(payload)})")
        step = f"reading the TTL of {blob}"
        info = store.stat(blob)
        if info.expires_at is None:
            return Check(BLOB_STORE, FAIL, f"{where}: TTL tagging does not work: a blob written with a TTL shows no "
                                           "expiry",
                         hint="the store must keep object tags set on upload (S3 x-amz-tagging); without them "
                              "blobs of a backup that never commits are never reclaimed")
        ttl = opts.probe_ttl_seconds
        if not before + ttl - TTL_SLACK_SECONDS <= info.expires_at <= after + ttl + TTL_SLACK_SECONDS:
            return Check(BLOB_STORE, FAIL, f"{where}: TTL tagging is off: a blob written with a {ttl}s "
                                           f"TTL expires at {info.expires_at:.0f}, not about "
                                           f"{before + opts.probe_ttl_seconds:.0f}")
        step = f"removing the TTL of {blob}"
        store.remove_ttl(blob)
        step = f"reading the TTL of {blob} after remove_ttl"
        if store.stat(blob).expires_at is not None:
            return Check(BLOB_STORE, FAIL, f"{where}: remove_ttl did not clear the TTL of {blob}",
                         hint="the credentials need permission to delete object tags (s3:DeleteObjectTagging)")

        step = f"deleting the blob {blob}"
        store.delete(blob)
        step = f"checking that {blob} is gone"
        if _exists(lambda: store.stat(blob)):
            return Check(BLOB_STORE, FAIL, f"{where}: the blob {blob} is still there after delete")
        blob = None
        step = f"deleting the record {record}"
        store.delete(record)
        step = f"checking that {record} is gone"
        if _exists(lambda: store.read_at(record)):
            return Check(BLOB_STORE, FAIL, f"{where}: the record {record} is still there after delete")
        record = ""
    except UsageError:
        raise
    except Exception as e:  # every other outcome is a finding, never a crash of the doctor
        if _transient(e):
            discard = False  # a store that does not answer would make each clean-up wait as long again
        return _blobstore_failure(e, opts, where, parsed.netloc if is_s3 else None, step, answered)
    finally:
        if store is not None and discard:
            _discard(store, blob, record)
    detail = f"{where}: " + ("credentials accepted, " if is_s3 else "") + "writable, TTL works"
    if stale:
        detail += f" (removed {stale} stale probe{'s' if stale != 1 else ''} under {DOCTOR_PREFIX})"
    return Check(BLOB_STORE, OK, detail)


def _remove_stale_probes(store: BlobStore, probes: list) -> int:
    horizon = time.time() - STALE_PROBE_SECONDS
    stale = [p.key for p in probes if p.modified_at < horizon]
    if stale:
        store.delete_many(stale)
    return len(stale)


def _exists(read: Callable[[], object]) -> bool:
    try:
        read()
    except BlobNotFoundError:
        return False
    return True


def _discard(store: BlobStore, blob: str | None, record: str) -> None:
    """Best-effort removal of the probes after a failed check: the failure already says what is wrong."""
    for key in (blob, record):
        if key:
            try:
                store.delete(key)
            except Exception:
                pass  # the blob has a TTL for gc; the record is removed by a later doctor run


def _blobstore_failure(e: Exception, opts: DoctorOptions, where: str, bucket: str | None, step: str,
                       answered: bool) -> Check:
    hint = getattr(e, "hint", None)
    if isinstance(e, AuthError):
        if "no credentials" in str(e):
            return Check(BLOB_STORE, FAIL, f"{where}: no credentials found: {e}", hint)
        if not answered:
            return Check(BLOB_STORE, FAIL, f"{where}: credentials rejected: {e}",
                         hint or "check the access key and secret (profile, AWS_* env or ~/.aws)")
        return Check(BLOB_STORE, FAIL, f"{where}: access denied {step}: {e}",
                     "the credentials work but lack a permission statectl needs: s3:ListBucket, s3:GetObject, "
                     "s3:PutObject, s3:DeleteObject and the object tagging actions")
    if isinstance(e, NotFoundError) and not isinstance(e, BlobNotFoundError) and bucket:
        return Check(BLOB_STORE, FAIL, f"bucket {bucket} does not exist"
                     + (f" at {opts.s3_endpoint}" if opts.s3_endpoint else ""),
                     hint="create it, or check --blobstore and --s3-endpoint")
    if isinstance(e, BlobNotFoundError):
        return Check(BLOB_STORE, FAIL, f"{where}: {step}: the object just written is not there ({e})", hint)
    if isinstance(e, DiskFullError):
        return Check(BLOB_STORE, FAIL, f"{where}: no space left {step}: {e}", hint)
    if _transient(e):
        if opts.s3_endpoint:
            unreachable = _unreachable(opts.s3_endpoint, min(opts.timeout_s, 5.0))
            if unreachable:
                return Check(BLOB_STORE, FAIL, f"cannot reach endpoint {opts.s3_endpoint}: {unreachable}",
                             hint="check --s3-endpoint (or s3_endpoint in the profile) and that the store is up")
        return Check(BLOB_STORE, FAIL, f"{where}: {step} failed: {e}",
                     hint or "the store answers but keeps failing; STATECTL_RETRIES sets how often statectl retries")
    if isinstance(e, StatectlError):
        what = "cannot be opened" if step == "opening it" else f"{step} failed"
        return Check(BLOB_STORE, FAIL, f"{where} {what}: {e}", hint)
    return Check(BLOB_STORE, FAIL, f"{where}: {step} failed: unexpected {type(e).__name__}: {e}",
                 "run again with --debug, and report it")


def _transient(e: Exception) -> bool:
    """A failure that retrying gave up on (the store down, unreachable or not answering)."""
    return isinstance(e, TransientBlobStoreError) or (isinstance(e, BlobStoreError)
                                                      and isinstance(e.__cause__, TransientBlobStoreError))


def _unreachable(endpoint: str, timeout_s: float) -> str | None:
    """Why a TCP connection to the endpoint's host and port fails, or None when it connects."""
    parsed = urlparse(endpoint)
    host = parsed.hostname
    if not host:
        return "it names no host"
    try:
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
    except ValueError:
        return "it has an invalid port"
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except socket.timeout:
        return f"no answer from {host}:{port} within {timeout_s:g}s"
    except OSError as e:
        return f"{host}:{port}: {e.strerror or e}"


# -- kafka -----------------------------------------------------------------------------------------


def check_kafka(opts: DoctorOptions) -> list[Check]:
    """The brokers answer; with a job, its checkpoint and coordinator topics exist with one partition."""
    if not opts.kafka:
        return [Check(name, SKIP, "no --kafka given") for name in (KAFKA, CHECKPOINT_TOPIC, COORDINATOR_TOPIC)]
    from statectl.kafka.client import open_consumer, unreachable

    bootstrap = opts.kafka
    consumer = None
    try:
        consumer = open_consumer(bootstrap, timeout_s=opts.timeout_s)
        try:
            topics = set(consumer.topics())
        except Exception as e:  # kafka-python's errors: the brokers stopped answering
            raise unreachable(bootstrap, e) from e
        brokers = Check(KAFKA, OK, f"brokers {bootstrap} answer ({len(topics)} topic{'s' if len(topics) != 1 else ''})")
        if not opts.job:
            hint = "pass --job (and --job-id) to check the job's topics"
            return [brokers, Check(CHECKPOINT_TOPIC, SKIP, "no --job given", hint),
                    Check(COORDINATOR_TOPIC, SKIP, "no --job given", hint)]
        checkpoint, coordinator = opts.topics()
        return [brokers,
                _topic_check(consumer, CHECKPOINT_TOPIC, checkpoint, topics, bootstrap,
                             "check --job and --job-id; the topic appears with the job's first checkpoint or the "
                             "first 'statectl backup --kafka'"),
                _topic_check(consumer, COORDINATOR_TOPIC, coordinator, topics, bootstrap,
                             "check --job and --job-id; the job creates its coordinator stream when it first starts "
                             "(drain and standby need it)")]
    except UsageError:
        raise
    except MissingDependencyError as e:
        failed = Check(KAFKA, FAIL, str(e), e.hint)
    except StatectlError as e:
        failed = Check(KAFKA, FAIL, str(e), e.hint)
    except Exception as e:
        failed = Check(KAFKA, FAIL, f"kafka {bootstrap}: unexpected {type(e).__name__}: {e}",
                       "run again with --debug, and report it")
    finally:
        if consumer is not None:
            try:
                consumer.close()
            except Exception:
                pass
    not_checked = "not checked: the brokers did not answer" if opts.job else "no --job given"
    return [failed, Check(CHECKPOINT_TOPIC, SKIP, not_checked), Check(COORDINATOR_TOPIC, SKIP, not_checked)]


def _topic_check(consumer, name: str, topic: str, topics: set[str], bootstrap: str, hint: str) -> Check:
    if topic not in topics:
        return Check(name, FAIL, f"topic {topic} does not exist on {bootstrap}", hint)
    # Metadata only: asking for offsets could make some brokers (Tansu) create a topic.
    try:
        partitions = consumer.partitions_for_topic(topic)
    except Exception as e:
        return Check(name, FAIL, f"cannot read the partitions of {topic} on {bootstrap}: {e}")
    n = len(partitions or ())
    if n != 1:
        return Check(name, FAIL, f"topic {topic} has {n} partitions; Samza reads and writes only one",
                     "recreate it with a single partition")
    return Check(name, OK, f"topic {topic} exists (1 partition)")


# -- rocksdict -------------------------------------------------------------------------------------


def check_rocksdict() -> Check:
    """rocksdict imports and can open, write, read back and close a store (in a temporary dir)."""
    try:
        import rocksdict
    except Exception as e:
        return Check(ROCKSDICT, FAIL, f"rocksdict does not import: {type(e).__name__}: {e}", "pip install rocksdict")
    version = _dist_version("rocksdict")
    tmp = tempfile.mkdtemp(prefix="statectl-doctor-")
    step = "opening a store"
    try:
        path = os.path.join(tmp, "store")
        db = rocksdict.Rdict(path, rocksdict.Options(raw_mode=True))
        try:
            step = "writing to it"
            db[b"statectl-doctor"] = b"ok"
            db.flush()
        finally:
            db.close()
        step = "reopening it read-only"
        db = rocksdict.Rdict(path, rocksdict.Options(raw_mode=True), access_type=rocksdict.AccessType.read_only())
        try:
            step = "reading it back"
            value = db.get(b"statectl-doctor")
        finally:
            db.close()
        if value != b"ok":
            return Check(ROCKSDICT, FAIL, f"rocksdict {version}: a value written to a store read back as {value!r}")
    except Exception as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        return Check(ROCKSDICT, FAIL, f"rocksdict {version}: {step} in {tmp} failed: {reason}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Check(ROCKSDICT, OK, f"rocksdict {version}: opened, wrote, read back and closed a store")


def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "(version unknown)"


# -- java and spark --------------------------------------------------------------------------------

_JAVA_VERSION = re.compile(r'version "([^"]+)"')


def java_binary() -> tuple[str | None, str]:
    """(path of the java that Spark would run, where it came from): $JAVA_HOME/bin/java, else PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        return (str(Path(home) / "bin" / "java") if (Path(home) / "bin" / "java").is_file() else None,
                f"JAVA_HOME={home}")
    return shutil.which("java"), "PATH"


def java_major(version: str) -> int | None:
    """17 for "17.0.15", 8 for "1.8.0_392"."""
    parts = re.findall(r"\d+", version)
    if not parts:
        return None
    major = int(parts[0])
    return int(parts[1]) if major == 1 and len(parts) > 1 else major


def check_java(pyspark_installed: bool) -> tuple[Check, str | None]:
    """``java -version`` runs: the check, and the version it printed (None when it did not run). Only the
    Spark jobs need Java: without pyspark a missing or broken Java is a skip."""
    problem_status = FAIL if pyspark_installed else SKIP
    needed = "" if pyspark_installed else " (only the Spark jobs need it)"
    java, source = java_binary()
    if java is None:
        where = f"{source} has no bin/java" if source != "PATH" else "no java on PATH"
        return Check(JAVA, problem_status, where + needed, JDK_HINT), None
    try:
        proc = subprocess.run([java, "-version"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=JAVA_TIMEOUT_S, errors="replace")
    except subprocess.TimeoutExpired:
        return Check(JAVA, problem_status, f"{java} -version did not finish within {JAVA_TIMEOUT_S:g}s" + needed,
                     JDK_HINT), None
    except OSError as e:
        return Check(JAVA, problem_status, f"{java} does not run: {e.strerror or e}" + needed, JDK_HINT), None
    out = (proc.stderr or "") + (proc.stdout or "")
    m = _JAVA_VERSION.search(out)
    if proc.returncode != 0 or not m:
        first = next((line.strip() for line in out.splitlines() if line.strip()), "no output")
        return Check(JAVA, problem_status, f"{java} -version failed (exit {proc.returncode}): {first}" + needed,
                     JDK_HINT), None
    return Check(JAVA, OK, f"java {m.group(1)} ({java})"), m.group(1)


def check_spark(pyspark_installed: bool, java: Check, java_version: str | None) -> Check:
    """pyspark imports, has its spark-submit, and the Java found suits its version. Skipped when pyspark
    is not installed (it is optional); a failure only when it is installed but cannot run."""
    if not pyspark_installed:
        return Check(SPARK, SKIP, "pyspark is not installed", SPARK_HINT)
    try:
        import pyspark
    except Exception as e:
        return Check(SPARK, FAIL, f"pyspark is installed but does not import: {type(e).__name__}: {e}",
                     "reinstall it: pip install --force-reinstall pyspark")
    version = getattr(pyspark, "__version__", None) or _dist_version("pyspark")
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    if not (submit.is_file() and os.access(submit, os.X_OK)):
        return Check(SPARK, FAIL, f"pyspark {version} has no runnable {submit}",
                     "reinstall it: pip install --force-reinstall pyspark")
    if java.status != OK or java_version is None:
        return Check(SPARK, FAIL, f"pyspark {version} is installed but Java is not usable: {java.detail}", JDK_HINT)
    major = java_major(java_version)
    needs = 17 if (java_major(version) or 0) >= 4 else 8
    if major is not None and major < needs:
        return Check(SPARK, FAIL, f"pyspark {version} needs Java {needs} or newer; the java found is {java_version}",
                     JDK_HINT)
    return Check(SPARK, OK, f"pyspark {version} with java {java_version} ({submit})")


# -- state dir -------------------------------------------------------------------------------------


def check_state_dir(state_dir: Path | None) -> Check:
    """The state dir exists (or can be created), takes a new file and a hard link to it. Whatever the check
    creates, the dir itself included, it removes again."""
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
    probe = path / f".statectl-doctor-{uuid.uuid4().hex[:12]}"
    link = probe.with_name(probe.name + ".link")
    step = "create"
    try:
        if missing:
            path.mkdir(parents=True)
        step = "write"
        with open(probe, "xb") as f:
            f.write(b"statectl doctor\n")
            f.flush()
            os.fsync(f.fileno())
        step = "link"
        os.link(probe, link)
        free = shutil.disk_usage(path).free
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
        for f in (link, probe):
            try:
                f.unlink()
            except OSError:
                pass
        for d in missing:  # deepest first
            try:
                d.rmdir()
            except OSError:
                break
    created = " (does not exist yet; can be created)" if missing else ""
    return Check(STATE_DIR, OK, f"{path} writable, hard links work, {_gib(free)} free{created}")


def _gib(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
