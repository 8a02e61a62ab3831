"""statectl's side of the Spark bulk path of ``adstore load --spark`` and ``rescale``: what to build
(:class:`BuildSpec`) and :func:`run_build`, which checks that Spark can run here (statectl.spark.probe), then
submits statectl/spark/job.py with the spark-submit of the pyspark install (statectl.spark.launch) and hands
back the SST files it wrote, sorted and partitioned as the target stores are, with their
:class:`BuildManifest`.

A build is idempotent per spec: ``out_dir`` ends with ``BUILD-MANIFEST.json`` (written last), and a
re-run that finds a complete manifest of the same spec (every file there with its size; for files, the
dataset's files unchanged in size and mtime: :func:`build_hash`) returns it without running Spark: an ingest
interrupted at any point is re-run from the same files. A topic build found complete is reused whatever
was written to the topic since: its manifest's offsets say where it ends. The caller removes out_dir once
the stores are in place, so that a later load builds afresh.

Secrets never go into the spec or the job file: the S3 keys and the Kafka passwords reach the job through
its environment (STATECTL_S3_ACCESS_KEY_ID, STATECTL_S3_SECRET_ACCESS_KEY, STATECTL_S3_SESSION_TOKEN,
STATECTL_KAFKA_SASL_PASSWORD, STATECTL_KAFKA_SSL_PASSWORD). In local mode the executors inherit it; on a
cluster the executors need them too (an instance role, or ``spark.executorEnv.*``), and statectl with its
dependencies installed in the Python the executors run (``spark.pyspark.python``).

pyspark, kafka-python and the blob store backends are imported inside functions only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statectl.errors import BlobNotFoundError, StatectlError, UsageError
from statectl.formats.adstore import Digest, KeyValueSpec
from statectl.fsutil import SYNC_NONE, write_atomic
from statectl.progress import NullProgress, ProgressReporter
from statectl.spark.launch import Started, rescale_conf, submit_job, worker_conf
from statectl.spark.probe import require_spark, spark_at_hand

BUILD_MANIFEST = "BUILD-MANIFEST.json"  # in out_dir, written last by the job
JOB_FILE = "BUILD-JOB.json"  # in out_dir: what the job is asked to do (no secrets)
LOG_FILE = "spark-submit.log"  # in out_dir: spark-submit's stdout and stderr
SST_PREFIX = "store-"  # every SST file of a build: store-<store>-<file>-<seq>.sst
STAGING_PREFIX = "adstore-builds/"  # blob keys of staged SST files: adstore-builds/<build id>/<file>
FORMATS = ("parquet", "jsonl", "csv")
_SUFFIXES = {"parquet": (".parquet",), "jsonl": (".jsonl", ".json", ".ndjson"), "csv": (".csv",)}


@dataclass(frozen=True)
class BuildSpec:
    """What a Spark build makes: the entries of a source, as ``kv`` turns them into (key, value), laid out
    as the target stores are, sorted, in SST files.

    Source ``"files"``: the dataset at ``path`` in format ``fmt`` (parquet|jsonl|csv); ``files`` lists its
    files in the order the put path reads them (statectl.local.datasets.open_dataset), which decides which
    of several rows with one key wins: the last one. Without ``files``: ``path`` itself, or the files under
    it named with the format's suffix (hidden and ``_`` names skipped), in name order. A row becomes an entry
    as ``kv.row_entry`` says (CSV: an empty field is None, as Spark reads it; JSON lines: ``json.loads`` of
    each non-blank line).

    Source ``"topic"``: ``partitions`` of ``topic`` on ``bootstrap``, each read from ``ranges[p] = (start,
    end)`` (end exclusive); without ``ranges`` :func:`run_build` reads them before submitting: the log start
    to the true end (statectl.kafka.tails). Of several records with one key the last in (partition, offset)
    order wins, and a null value (or an extractor's None value) leaves the key out.

    ``layout``: ``"broadcast"`` (one store; every key) or ``"partitioned"``: from files ``partitions_out``
    stores, store k holding the keys with ``partition_of(key, partitions_out) == k``; from a topic one store
    per partition (store p holds partition p's records as they are, never re-hashed). ``files_per_store``
    splits each store into that many SST files of disjoint key ranges (more tasks; a sampling pass more),
    ``max_file_bytes`` rolls a task's output over to a new file. ``staging``: ``"local"`` (the executors
    write into out_dir: local mode, or a filesystem every executor shares) or a blob store URL the SST files
    travel through (``file://...``, ``s3://...``).
    """

    source: str
    kv: KeyValueSpec = KeyValueSpec()
    layout: str = "broadcast"
    partitions_out: int | None = None
    files_per_store: int = 1
    max_file_bytes: int = 256 * 1024 * 1024
    staging: str = "local"
    # source "files"
    path: str | None = None
    fmt: str | None = None
    files: tuple[str, ...] = ()
    # source "topic"
    bootstrap: str | None = None
    topic: str | None = None
    partitions: tuple[int, ...] = ()
    ranges: dict[int, tuple[int, int]] | None = None
    # source "snapshots" (rescale): every key of the source snapshots, re-routed to ``partitions_out`` stores
    # by ``partitioner`` ("module:callable", called as f(key: bytes, partitions: int) -> int; None: Kafka's
    # murmur2 partitioner). ``snapshots``: per source task {"task", "snapshot", "files": [{"path", "size",
    # "checksum", "blobs": [[blob id, offset], ...]}], "groups": [first, last] (optional, with a keygroups:G
    # partitioner: only the keys of those key groups are read)}, read by the executors from ``source_store``.
    # ``partitions_in``: every key of source i (one without "groups") must route to i under
    # (``source_partitioner``, partitions_in): the sources are the layout the rescale assumes. ``prefetched``: a
    # dir on the executors' own disk (a local master's) into which statectl downloads the sources while the job
    # starts: source i in <dir>/<i>, whole and checked once <dir>/<i>.ready exists (<i>.failed: the executor
    # fetches it itself, as without).
    snapshots: tuple[dict[str, Any], ...] = ()
    source_store: str | None = None
    partitioner: str | None = None
    partitions_in: int | None = None
    source_partitioner: str | None = None
    prefetched: str | None = None

    def validate(self) -> None:
        """Raise UsageError for a spec that cannot be built."""
        if self.source not in ("files", "topic", "snapshots"):
            raise UsageError(f"build source {self.source!r}: expected files, topic or snapshots")
        if self.layout not in ("broadcast", "partitioned"):
            raise UsageError(f"build layout {self.layout!r}: expected broadcast or partitioned")
        if self.files_per_store < 1:
            raise UsageError("files_per_store must be at least 1")
        if self.max_file_bytes < 1:
            raise UsageError("max_file_bytes must be at least 1")
        if self.source == "files":
            if not self.path:
                raise UsageError("a files build needs a path")
            if self.fmt not in FORMATS:
                raise UsageError(f"format {self.fmt!r}: expected one of {', '.join(FORMATS)}")
            if self.kv.key_column is None:
                raise UsageError("a files build needs a key column")
            if self.layout == "partitioned" and (self.partitions_out is None or self.partitions_out < 1):
                raise UsageError("a partitioned files build needs partitions_out of at least 1")
        elif self.source == "snapshots":
            if not self.snapshots or not self.source_store:
                raise UsageError("a snapshots build needs source snapshots and the blob store they are in")
            if self.layout != "partitioned" or self.partitions_out is None or self.partitions_out < 1:
                raise UsageError("a snapshots build is partitioned, into partitions_out of at least 1")
            for name in (self.partitioner, self.source_partitioner):
                if name not in (None, "murmur2") and not re.fullmatch(r"[\w.]+:[\w.]+", name):
                    raise UsageError(f"partitioner {name!r}: expected module:callable")
        else:
            if not self.bootstrap or not self.topic:
                raise UsageError("a topic build needs bootstrap and topic")
            if not self.partitions or len(set(self.partitions)) != len(self.partitions) \
                    or min(self.partitions) < 0:
                raise UsageError("a topic build needs distinct partitions, 0 or more")
            if self.ranges is not None:
                for p in self.partitions:
                    r = self.ranges.get(p)
                    if r is None or not 0 <= r[0] <= r[1]:
                        raise UsageError(f"partition {p}: no offset range, or an invalid one: {r}")

    def stores(self) -> list[int | None]:
        """The stores of the build, in order: [None] for broadcast, else the store numbers."""
        if self.layout == "broadcast":
            return [None]
        if self.source == "topic":
            return sorted(self.partitions)
        return list(range(self.partitions_out or 0))

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["kv"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(self.kv).items()}
        d["files"] = list(self.files)
        d["partitions"] = list(self.partitions)
        d["snapshots"] = list(self.snapshots)
        d["ranges"] = None if self.ranges is None else {str(p): list(r) for p, r in sorted(self.ranges.items())}
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "BuildSpec":
        try:
            kv = dict(d.get("kv") or {})
            kv["value_columns"] = tuple(kv.get("value_columns") or ())
            ranges = d.get("ranges")
            return cls(**{**d, "kv": KeyValueSpec(**kv), "files": tuple(d.get("files") or ()),
                          "partitions": tuple(int(p) for p in d.get("partitions") or ()),
                          "snapshots": tuple(d.get("snapshots") or ()),
                          "ranges": None if ranges is None else {int(p): (int(r[0]), int(r[1]))
                                                                  for p, r in ranges.items()}})
        except (TypeError, ValueError, KeyError, IndexError) as e:
            raise ValueError(f"malformed build spec: {e}") from None

    @classmethod
    def from_json(cls, text: str) -> "BuildSpec":
        try:
            d = json.loads(text)
        except ValueError as e:
            raise ValueError(f"malformed build spec: {e}") from None
        return cls.from_dict(d)

    def spec_hash(self) -> str:
        """sha256 of the canonical JSON: two specs with one hash build the same files."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()


@dataclass
class BuildFile:
    """One SST file of a build: its store (None: the broadcast store), name in out_dir, size, the rows of
    the source that went into it (with the duplicates and deletions), and the Digest of its entries.
    ``key``: its blob key while it travels through the blob store."""

    store: int | None
    name: str
    size: int
    rows: int
    digest: Digest
    key: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"store": self.store, "file": self.name, "bytes": self.size, "rows": self.rows,
                "digest": self.digest.as_json(), "key": self.key}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "BuildFile":
        return cls(None if d["store"] is None else int(d["store"]), str(d["file"]), int(d["bytes"]),
                   int(d["rows"]), Digest.from_json(d["digest"]), d.get("key"))


@dataclass
class StoreBuild:
    """One target store of a build: its files in key order, the rows of the source for it (duplicates and
    deletions included), how many rows lost to a later one with the same key (``duplicates``), and the
    Digest of the store the files make."""

    store: int | None
    files: list[str]
    rows: int
    duplicates: int
    digest: Digest


@dataclass
class BuildManifest:
    """What a build made in ``out_dir``: per store its files and Digest; for a topic, per partition the end
    offset (exclusive) read to: the store's SIDE-INPUT-OFFSETS names ``end - 1`` (nothing when the
    partition was empty)."""

    spec_hash: str
    out_dir: Path
    stores: list[StoreBuild]
    files: list[BuildFile]
    offsets: dict[int, int] = field(default_factory=dict)
    created: str = ""
    duration_s: float = 0.0
    spark_ran: bool = True
    path: str = "python"  # how the job made the entries: "jvm" (plain key and value columns), "python", or
    # "split" (a rescale: each source written as read into a file per target; a target's files overlap in key
    # range, each key in one of them)
    # the JVM path: where its key ranges came from, "parquet-sample" (the driver read a sample of the key
    # column), "jsonl-sample" / "csv-sample" (the driver read a few chunks of the files) or "spark-sample"
    # (repartitionByRange read the input for them), or "parquet-sorted" (none: a Parquet file its row groups'
    # statistics say is sorted, written as it is read, without a shuffle). JSON lines on that path: Spark's text reader, the lines
    # parsed per Arrow batch by pyarrow in the executors' Python (not a Python object per row)
    ranges: str = ""
    # a snapshots build: per source task what the executors read, {"task", "snapshot", "keys", "bytes_read"},
    # and the Digest of every entry read (keys and checksum)
    sources: list[dict[str, Any]] = field(default_factory=list)
    build_id: str = ""
    source_digest: Digest | None = None
    # the driver's phases, in seconds: session_s (the SparkSession or a rescale's SparkContext), plan_s (the
    # JVM path's plan: footers, sample), write_s (its one job), driver_s (the driver's whole run, the JVM's
    # start and exit excluded); unsorted_attempt_s / sorted_attempt_s: a "parquet-sorted" write, unsorted,
    # that met rows out of key order (done again sorted) / sorted, whose files overlapped (done again with the
    # shuffle); a rescale's
    # tasks_start_s (from its job's submission to its first task's start), fetch_s and split_s (its tasks'
    # downloads and their read-route-write, summed over the sources)
    phases: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The ``BUILD-MANIFEST.json`` document (the job writes it; :meth:`read` reads it back)."""
        out: dict[str, Any] = {
            "format": 1, "spec_hash": self.spec_hash, "build_id": self.build_id, "created": self.created,
            "duration_s": self.duration_s,
            "stores": [{"store": s.store, "rows": s.rows, "duplicates": s.duplicates, "files": s.files,
                        "digest": s.digest.as_json()} for s in self.stores],
            "files": [f.to_json() for f in self.files], "path": self.path}
        if self.offsets:
            out["offsets"] = {str(p): e for p, e in sorted(self.offsets.items())}
        if self.ranges:
            out["ranges"] = self.ranges
        if self.sources:
            out["sources"] = self.sources
        if self.source_digest is not None:
            out["source_digest"] = self.source_digest.as_json()
        if self.phases:
            out["phases"] = self.phases
        return out

    def store(self, store: int | None) -> StoreBuild:
        for s in self.stores:
            if s.store == store:
                return s
        raise KeyError(store)

    def paths(self, store: int | None) -> list[Path]:
        """The SST files of ``store`` in out_dir, in key order (what ingest_into_new_store takes)."""
        return [self.out_dir / name for name in self.store(store).files]

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.stores)

    @property
    def digests(self) -> list[Digest]:
        return [s.digest for s in self.stores]

    @classmethod
    def read(cls, out_dir: Path) -> "BuildManifest":
        """The manifest in ``out_dir``; FileNotFoundError when there is none, ValueError when malformed."""
        text = (Path(out_dir) / BUILD_MANIFEST).read_text()
        try:
            d = json.loads(text)
            files = [BuildFile.from_json(f) for f in d["files"]]
            stores = [StoreBuild(None if s["store"] is None else int(s["store"]), [str(n) for n in s["files"]],
                                 int(s["rows"]), int(s["duplicates"]), Digest.from_json(s["digest"]))
                      for s in d["stores"]]
            return cls(str(d["spec_hash"]), Path(out_dir), stores, files,
                       {int(p): int(e) for p, e in (d.get("offsets") or {}).items()}, str(d.get("created", "")),
                       float(d.get("duration_s", 0.0)), path=str(d.get("path", "python")),
                       ranges=str(d.get("ranges", "")),
                       sources=list(d.get("sources") or []), build_id=str(d.get("build_id", "")),
                       source_digest=None if d.get("source_digest") is None else Digest.from_json(d["source_digest"]),
                       phases={str(k): float(v) for k, v in (d.get("phases") or {}).items()})
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ValueError(f"malformed {BUILD_MANIFEST} in {out_dir}: {e}") from None

    def problems(self) -> list[str]:
        """Files the manifest names that are missing from out_dir or have another size."""
        out = []
        for f in self.files:
            p = self.out_dir / f.name
            try:
                size = p.stat().st_size
            except FileNotFoundError:
                out.append(f"{f.name} is missing")
                continue
            if size != f.size:
                out.append(f"{f.name} has {size} bytes, the manifest says {f.size}")
        return out


def start_rescale_build(out_dir: Path, *, master: str, conf: dict[str, str] | None = None,
                        s3: Any = None) -> Started | None:
    """A snapshots build (a rescale's) started in ``out_dir`` (made here) before its spec is known; its driver
    waits for the job file :func:`run_build` writes when given it (launch.Started: ``cancel`` when no build
    follows). None when it cannot start ahead (no spark-submit or java at hand, one that does not run, or the class
    archive to record): run_build then starts it, and says what is missing."""
    from statectl.errors import MissingDependencyError

    try:
        submit = spark_at_hand("rescale")
    except MissingDependencyError:
        return None
    out_dir = Path(out_dir).absolute()
    out_dir.mkdir(parents=True)
    try:
        return Started.start(submit, out_dir / JOB_FILE, out_dir / LOG_FILE, master, rescale_conf(conf or {}),
                             _secret_env(s3, None))
    except OSError:  # spark-submit does not run: run_build says why, after the plan's own checks
        return None


def run_build(spec: BuildSpec, out_dir: Path, *, master: str = "local[*]", conf: dict[str, str] | None = None,
              progress: ProgressReporter | None = None, timeout_s: float | None = None,
              s3: Any = None, kafka_security: Any = None, started: Started | None = None) -> BuildManifest:
    """Build the SST files ``spec`` asks for into ``out_dir`` (created if missing) with a Spark job, and
    return its manifest (see the module doc for re-runs). ``master``/``conf``: spark-submit's; ``s3``: the
    S3Options of an ``s3://`` staging store; ``kafka_security``: the topic's KafkaSecurity; ``started``: its job,
    started in ``out_dir`` (:func:`start_rescale_build`).
    Raises UsageError for a bad spec; MissingDependencyError (13) without pyspark or a usable Java;
    NotFoundError for a topic or partition that does not exist; StatectlError with the job's own one-line
    error (and the log file as hint) when the job fails, or when it did not finish within ``timeout_s`` (the
    job is killed); KeyboardInterrupt after killing the job on Ctrl-C or SIGTERM. What an interrupted or
    failed build left in out_dir is replaced by the next run.
    """
    spec.validate()
    progress = progress or NullProgress()
    out_dir = Path(out_dir).absolute()
    began = time.monotonic()
    resolved = spec
    if spec.source == "files" and not spec.files:
        resolved = dataclasses.replace(spec, files=tuple(str(f) for f in _list_files(Path(spec.path), spec.fmt)))
    spec_hash = build_hash(resolved) if spec.source == "files" else spec.spec_hash()
    build_id = spec_hash[:16]
    done = _reuse(out_dir, spec_hash, s3, progress) if started is None else None  # started: in a new out_dir
    if done is not None:
        return done
    submit = spark_at_hand("rescale" if spec.source == "snapshots" else "adstore load --spark")
    out_dir.mkdir(parents=True, exist_ok=True)
    _clear(out_dir)
    staging = None
    try:
        if spec.staging != "local":
            staging = _open_staging(spec.staging, s3)
            staging.delete(info.key for info in staging.list(f"{STAGING_PREFIX}{build_id}/"))
        if spec.source == "topic" and spec.ranges is None:
            resolved = dataclasses.replace(spec, ranges=topic_ranges(spec, kafka_security))
        job = {"spec": resolved.to_dict(), "spec_hash": spec_hash, "build_id": build_id, "out_dir": str(out_dir),
               "s3": _s3_public(s3), "kafka_security": _kafka_public(kafka_security)}
        job_file, text = out_dir / JOB_FILE, json.dumps(job, indent=2) + "\n"
        job_file.write_text(text) if started is None else write_atomic(job_file, text, sync=SYNC_NONE)  # read at once
        progress.note(f"running the Spark build of {_describe(spec)} on {master} (log: {out_dir / LOG_FILE})")
        _submit(submit, spec, job_file, master, conf or {}, timeout_s, _secret_env(s3, kafka_security), progress,
                started)
        try:
            manifest = BuildManifest.read(out_dir)
        except (OSError, ValueError) as e:
            raise StatectlError(f"the Spark build finished without a valid {BUILD_MANIFEST}: {e}",
                                hint=f"see {out_dir / LOG_FILE}") from None
        if staging is not None:
            _download(staging, manifest, progress)
        problems = manifest.problems()
        if problems:
            raise StatectlError(f"the Spark build's files in {out_dir} do not match its manifest: {problems[0]}"
                                + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
        if staging is not None:
            _delete_staged(staging, build_id)
    finally:
        if staging is not None:
            staging.close()
    manifest.duration_s = round(time.monotonic() - began, 3)
    return manifest


def _submit(submit: Path, spec: BuildSpec, job_file: Path, master: str, conf: dict[str, str],
            timeout_s: float | None, secrets: dict[str, str], progress: ProgressReporter,
            started: Started | None = None) -> None:
    """Run the job (launch.submit_job), its status lines shown as the status of ``Spark build of ...``. A
    rescale's driver JVM does no heavy work of its own (statectl.spark.job._rescale): launch.rescale_conf; every
    job's Python workers import the installed pyspark (launch.worker_conf).
    When it fails, :func:`probe.require_spark` says whether a Java that does not run, or does not suit pyspark, is
    why (exit 13)."""
    subject = f"Spark build of {_describe(spec)}"
    conf = rescale_conf(conf) if spec.source == "snapshots" else worker_conf(conf)
    try:
        submit_job(submit, job_file, job_file.parent / LOG_FILE, master, conf, timeout_s, secrets,
                   lambda figures: progress.status(subject, **figures), started)
    except (StatectlError, OSError):
        require_spark("rescale" if spec.source == "snapshots" else "adstore load --spark")
        raise
    finally:
        progress.status(subject)  # its line ends with the job


def build_hash(spec: BuildSpec) -> str:
    """What a files build's manifest is matched by on a re-run: the spec's hash with the size and mtime of
    each of its files (a dataset rewritten since is built again). UsageError when a file is missing."""
    stats = []
    for f in spec.files or (spec.path,):
        try:
            st = os.stat(str(f))
        except OSError as e:
            raise UsageError(f"dataset file {f}: {e.strerror or e}") from None
        stats.append([str(f), st.st_size, st.st_mtime_ns])
    return hashlib.sha256((spec.spec_hash() + "\n" + json.dumps(stats)).encode()).hexdigest()


def topic_ranges(spec: BuildSpec, security: Any = None) -> dict[int, tuple[int, int]]:
    """Per partition of the spec, (log start, true end) as the brokers have them now (statectl.kafka.tails:
    Tansu under-reports its high watermark). NotFoundError for a missing topic or partition."""
    from statectl.kafka.client import open_consumer, require_partition
    from statectl.kafka.tails import read_tails

    assert spec.bootstrap and spec.topic
    consumer = open_consumer(spec.bootstrap, security=security)
    try:
        for p in spec.partitions:
            require_partition(consumer, spec.topic, p, spec.bootstrap)
        tails = read_tails(consumer, spec.topic, sorted(spec.partitions), spec.bootstrap, last=1)
    finally:
        consumer.close()
    return {p: (t.beginning, t.end) for p, t in tails.items()}


def _describe(spec: BuildSpec) -> str:
    if spec.source == "snapshots":
        return f"{len(spec.snapshots)} snapshots into {spec.partitions_out} stores"
    return f"{spec.path} ({spec.fmt})" if spec.source == "files" else f"topic {spec.topic}"


def _list_files(path: Path, fmt: str | None) -> list[Path]:
    """The files of a dataset as statectl.local.datasets.open_dataset lists them (the engine passes that
    list; this serves specs built without one)."""
    if not path.exists():
        raise UsageError(f"dataset {path} does not exist")
    if path.is_file():
        return [path.absolute()]
    own = _SUFFIXES.get(fmt or "", ())
    files = sorted(p.absolute() for p in path.rglob("*") if p.is_file()
                   and not any(part.startswith((".", "_")) for part in p.relative_to(path).parts)
                   and p.suffix.lower() in own)
    if not files:
        raise UsageError(f"dataset {path} holds no {fmt} files")
    return files


def _reuse(out_dir: Path, spec_hash: str, s3: Any, progress: ProgressReporter) -> BuildManifest | None:
    """The complete build of this spec already in out_dir (downloading staged files still missing), or None."""
    try:
        manifest = BuildManifest.read(out_dir)
    except (OSError, ValueError):
        return None
    if manifest.spec_hash != spec_hash:
        return None
    missing = [f for f in manifest.files if not _present(manifest.out_dir / f.name, f.size)]
    if missing:
        try:
            job = json.loads((out_dir / JOB_FILE).read_text())
            staging_url = job["spec"]["staging"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if staging_url == "local" or any(f.key is None for f in missing):
            return None
        store = _open_staging(staging_url, s3)
        try:
            _download(store, manifest, progress)
        except BlobNotFoundError:
            return None
        finally:
            store.close()
        if manifest.problems():
            return None
        store = _open_staging(staging_url, s3)
        try:
            _delete_staged(store, job["build_id"])
        finally:
            store.close()
    progress.note(f"reusing the Spark build in {out_dir} (its manifest matches)")
    manifest.spark_ran = False
    return manifest


def _present(path: Path, size: int) -> bool:
    try:
        return path.stat().st_size == size
    except FileNotFoundError:
        return False


def _clear(out_dir: Path) -> None:
    """Remove what an earlier build left in out_dir (its manifest first, so nothing looks complete)."""
    (out_dir / BUILD_MANIFEST).unlink(missing_ok=True)
    for p in out_dir.iterdir():
        if p.name.startswith((SST_PREFIX, f".{SST_PREFIX}", f".{BUILD_MANIFEST}", JOB_FILE)) and p.is_file():
            p.unlink()


def _open_staging(url: str, s3: Any) -> Any:
    from statectl.blobstore import open_blobstore

    return open_blobstore(url, s3=s3)


def _download(store: Any, manifest: BuildManifest, progress: ProgressReporter) -> None:
    """Fetch every staged file that is not in out_dir with its size (tmp + rename). BlobNotFoundError when
    one is gone from the blob store."""
    for f in manifest.files:
        target = manifest.out_dir / f.name
        if f.key is None or _present(target, f.size):
            continue
        tmp = target.with_name(f".{f.name}.download")
        with open(tmp, "wb") as fh:
            store.get(f.key, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
        progress.advance(f.size)


def _delete_staged(store: Any, build_id: str) -> None:
    store.delete(info.key for info in list(store.list(f"{STAGING_PREFIX}{build_id}/")))


def _s3_public(s3: Any) -> dict[str, Any] | None:
    if s3 is None:
        return None
    return {k: getattr(s3, k) for k in ("endpoint_url", "region", "profile", "max_connections", "timeout_s",
                                        "part_size", "sse", "sse_kms_key_id")}


def _kafka_public(security: Any) -> dict[str, Any] | None:
    if security is None:
        return None
    return {k: getattr(security, k) for k in ("protocol", "sasl_mechanism", "sasl_username", "ssl_cafile",
                                              "ssl_certfile", "ssl_keyfile", "ssl_check_hostname")}


def _secret_env(s3: Any, security: Any) -> dict[str, str]:
    env: dict[str, str] = {}
    pairs = [("STATECTL_S3_ACCESS_KEY_ID", getattr(s3, "access_key_id", None)),
             ("STATECTL_S3_SECRET_ACCESS_KEY", getattr(s3, "secret_access_key", None)),
             ("STATECTL_S3_SESSION_TOKEN", getattr(s3, "session_token", None)),
             ("STATECTL_KAFKA_SASL_PASSWORD", getattr(security, "sasl_password", None)),
             ("STATECTL_KAFKA_SSL_PASSWORD", getattr(security, "ssl_password", None))]
    for name, value in pairs:
        if value:
            env[name] = value
    return env
