"""The PySpark application of ``adstore load --spark`` and ``rescale``, run by spark-submit
(statectl.spark.submit): ``spark-submit ... statectl/spark/job.py <out_dir>/BUILD-JOB.json``. This is the
driver: :func:`build` reads the source (statectl.spark.sources), lays the entries out as the target stores
are (Kafka's partitioner for partitioned file builds; a topic's own partition), sorts each by key bytes (then
by source order: the last row or record of a key wins, a None value leaves the key out), has the executors
write SST files (statectl.spark.writer) into out_dir, or through the blob store when ``staging`` names one,
and writes ``BUILD-MANIFEST.json`` into out_dir last (tmp + rename). A rescale's sources are in key order
already: one stage, one task per source, reads each and writes its target files as it reads
(statectl.spark.rescale_reader), with no shuffle. While it runs, its status (stages done, rows written)
goes to stderr as status lines (statectl.spark.status).

A row, record or read that fails ends the job; its one-line error is printed after ERROR_MARK.

Everything the executors run lives at the top level of the modules of statectl.spark, so that it pickles by
reference (the executors import those modules; PYTHONPATH names statectl's root) and not by value from
``__main__``.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from statectl.formats.adstore import Digest
from statectl.fsutil import process_alive, write_atomic
from statectl.spark.context import BuildError, BuildJob, local_path, one_line
from statectl.spark.daemon import prefer_installed_pyspark
from statectl.spark.frames import arrow_batches, lay_out, plain_frame
from statectl.spark.rescale_reader import SplitSources, WarmSplit
from statectl.spark.footers import read_footers
from statectl.spark.sampler import FilePartitioner, file_bounds, prefetch_parquet_sample
from statectl.spark.sources import files_rdd, topic_rdd
from statectl.spark.status import DONE_MARK, WAITING_MARK, StatusLines
from statectl.spark.launch import ERROR_MARK, WHEN_WRITTEN
from statectl.spark.submit import BUILD_MANIFEST, SST_PREFIX, BuildFile, BuildManifest, StoreBuild
from statectl.spark.writer import OUT_OF_ORDER, Warm, WriteArrow, WriteFiles, entry_digest_columns


def build(doc: dict[str, Any]) -> dict[str, Any]:
    """Run the build the job document asks for; write and return the manifest."""
    began = time.monotonic()
    prefer_installed_pyspark()
    job = BuildJob(doc)
    spec = job.spec
    if spec.source == "snapshots":
        return _rescale(job, began)
    from pyspark import StorageLevel

    spark, footers = _session(job)
    phases = {"session_s": round(time.monotonic() - began, 3)}
    try:
        sc = spark.sparkContext
        sc.setLogLevel("WARN")
        written = sc.accumulator(0)  # rows the finished tasks wrote: the build's status
        with StatusLines(sc, written):
            plain = plain_frame(spark, job, footers)
            if plain is not None:
                _warm_workers(spark)
                arrow_batches(spark, job, footers)
                _no_adaptive_plan(spark)
                tasks, ranges = _write_jvm(spark, job, plain, footers, began, phases, written)
                return _finish(job, tasks, began, "jvm", ranges=ranges, phases=phases)
            keyed = topic_rdd(sc, job) if spec.source == "topic" else files_rdd(spark, job)
            stores, per_store = len(job.stores), spec.files_per_store
            bounds: list[list[bytes]] = []
            if per_store > 1:
                keyed = keyed.persist(StorageLevel.MEMORY_AND_DISK)  # read the source once for the sample and the build
                bounds = file_bounds(keyed, stores, per_store)
            laid_out = keyed.repartitionAndSortWithinPartitions(stores * per_store, FilePartitioner(per_store, bounds))
            tasks = laid_out.mapPartitionsWithIndex(WriteFiles(job, written)).collect()
    except BuildError:
        raise
    except Exception as e:
        raise BuildError(summarize(e)) from None  # while the JVM still answers for its exception
    finally:
        spark.stop()
    return _finish(job, tasks, began, phases=phases)


def _rescale(job: BuildJob, began: float) -> dict[str, Any]:
    """A snapshots build: one stage of one task per source (rescale_reader.SplitSources: each source read once
    and written as it is read into a file per target it routes keys to), on a plain SparkContext (no SQL
    session, no plan, no shuffle). Writes the manifest with what each source's task read, the Digest of every
    entry read (the targets' files' Digests, summed per target by _finish, must add up to it) and the
    phases."""
    return _rescale_on(_rescale_context(), lambda: job, began)


def rescale_when_written(job_file: Path, parent: int) -> dict[str, Any]:
    """A rescale started before statectl (process ``parent``) wrote its job file (launch.Started): the
    SparkContext starts while it is written, and the Python workers (:class:`WarmSplit`) too when it is not
    there yet, then _rescale's stage."""
    began = time.monotonic()
    prefer_installed_pyspark()
    sc = _rescale_context()

    def job() -> BuildJob:
        if not job_file.exists():  # the stage would wait: its workers start meanwhile
            print(WAITING_MARK, file=sys.stderr, flush=True)
            _warm_split_workers(sc)
        return _rescale_job(_when_written(job_file, parent))

    return _rescale_on(sc, job, began)


def _rescale_context() -> Any:
    from pyspark import SparkContext

    _no_numpy_converters()
    return SparkContext.getOrCreate()


def _rescale_on(sc: Any, job: Any, began: float) -> dict[str, Any]:
    """_rescale's stage on ``sc``, for the BuildJob ``job()`` gives; the SparkContext stopped at the end."""
    phases = {"session_s": round(time.monotonic() - began, 3)}
    try:
        t0 = time.monotonic()
        ready = job()
        phases["job_wait_s"] = round(time.monotonic() - t0, 3)  # for its job file, when started before it
        doc = _split_sources(sc, ready, began, phases)
        print(DONE_MARK, file=sys.stderr, flush=True)  # the launcher goes on while the context stops
        return doc
    finally:
        sc.stop()


_WAIT_S = 0.01


def _when_written(job_file: Path, parent: int) -> dict[str, Any]:
    """The job document once ``job_file`` is there (written whole, in one rename); BuildError when process
    ``parent`` (statectl) or this driver's JVM ends first: no job is coming."""
    jvm = os.getppid()
    while not job_file.exists():
        if os.getppid() != jvm or not process_alive(parent):
            raise BuildError("statectl ended before it wrote the job file")
        time.sleep(_WAIT_S)
    return json.loads(job_file.read_text())


def _rescale_job(doc: dict[str, Any]) -> BuildJob:
    job = BuildJob(doc)
    if job.spec.source != "snapshots":
        raise BuildError(f"a job file written later is a rescale's, not a {job.spec.source} build")
    return job


def _warm_split_workers(sc: Any) -> None:
    """Start the rescale stage's Python workers now (rescale_reader.WarmSplit, :func:`_warm_in_background`),
    its job submitted before this returns: the stage's tasks, which come later, take its workers, so their start
    (the Python daemon's, the imports) and Spark's first job go on while the driver sets the stage up."""
    _warm_in_background(sc, lambda cores: sc.parallelize(range(cores), cores).mapPartitions(WarmSplit()).collect(),
                        wait_submitted=True)


def _warm_in_background(sc: Any, run: Any, *, wait_submitted: bool = False) -> None:
    """Run ``run(cores)``, a job of one task per core whose workers import what a build's stage imports, in a
    thread, in a job group of its own (the build's status counts the stages of the jobs without one): Spark
    keeps the workers for reuse (spark.python.worker.reuse; nothing to do without it), so the stage's tasks find
    them ready. ``wait_submitted``: return once the job is submitted (for at most _WARM_SUBMIT_S)."""
    import threading

    cores = max(1, int(sc.defaultParallelism))
    if sc.getConf().get("spark.python.worker.reuse", "true").lower() != "true":
        return

    def warm() -> None:
        sc.setJobGroup(_WARM_GROUP, "start the Python workers")
        run(cores)

    t = threading.Thread(target=lambda: _quietly(warm), name="statectl-warm", daemon=True)
    t.start()
    tracker, deadline = sc.statusTracker(), time.monotonic() + _WARM_SUBMIT_S
    while wait_submitted and t.is_alive() and not tracker.getJobIdsForGroup(_WARM_GROUP) \
            and time.monotonic() < deadline:
        time.sleep(0.002)


_WARM_GROUP = "statectl-warm-up"
_WARM_SUBMIT_S = 1.0


def _no_numpy_converters() -> None:
    """Drop pyspark's py4j converters of numpy values from this driver, which passes none to the JVM: each asks
    pyspark.testing.utils whether numpy is installed, and the first call into the JVM that passes a list or a
    dict (the job's own) then imports pandas, pyarrow and grpc with it (0.4-0.7 s before the job is submitted)."""
    from py4j import protocol

    protocol.INPUT_CONVERTER[:] = [c for c in protocol.INPUT_CONVERTER
                                   if type(c).__name__ not in ("NumpyArrayConverter", "NumpyScalarConverter")]


def _split_sources(sc: Any, job: BuildJob, began: float, phases: dict[str, float]) -> dict[str, Any]:
    """The rescale's one stage on ``sc`` (_rescale); writes and returns the manifest."""
    spec = job.spec
    try:
        sc.setLogLevel("WARN")
        written = sc.accumulator(0)  # rows the finished tasks wrote: the build's status
        sources = [(i, json.dumps(s)) for i, s in enumerate(spec.snapshots)]
        t0, submitted = time.monotonic(), time.time()
        with StatusLines(sc, written):
            records = [json.loads(r) for r in
                       sc.parallelize(sources, len(sources)).mapPartitions(SplitSources(job, written)).collect()]
        phases["write_s"] = round(time.monotonic() - t0, 3)
        # from the job's submission to its first task's start (the Python workers' start), and the tasks' own
        # times summed: the download of the sources, and their read, route and write
        phases["tasks_start_s"] = round(min((r["began"] for r in records), default=submitted) - submitted, 3)
        phases["fetch_s"] = round(sum(r["fetch_s"] for r in records), 3)
        phases["split_s"] = round(sum(r["split_s"] for r in records), 3)
    except BuildError:
        raise
    except Exception as e:
        raise BuildError(summarize(e)) from None  # while the JVM still answers for its exception
    if sorted(r["source"] for r in records) != list(range(len(sources))):
        raise BuildError(f"read {len(records)} of the {len(sources)} source snapshots")
    records.sort(key=lambda r: r["source"])
    digest = Digest()
    for r in records:
        digest.merge(Digest.from_json(r["digest"]))
    read = [{k: r[k] for k in ("task", "snapshot", "keys", "bytes_read")} for r in records]
    tasks = [t for r in records for t in r["targets"]]
    return _finish(job, tasks, began, "split", sources=read, source_digest=digest, phases=phases)


def _write_jvm(spark: Any, job: BuildJob, plain: Any, footers: Any, began: float, phases: dict[str, float],
               written: Any = None) -> tuple[list[dict[str, Any]], str]:
    """The JVM path's one job (frames.lay_out, each partition sorted and written by writer.WriteArrow): the
    tasks' records and where the key ranges came from. A dataset laid out as it is read ("parquet-sorted")
    is first written as it comes, unsorted (one store, several row groups in key order: its rows are in key
    order already, or a task says they are not), then sorted in each partition; files that overlap then (statistics that lied) make it
    built again with the shuffle. What an attempt wrote is removed before the next. ``written``: the
    accumulator of rows written (the build's status)."""
    # unsorted only where the statistics say something of the rows' order: several row groups in key order
    runs = footers.sorted_runs(job.spec.kv.key_column) if footers is not None else None
    presorted, sort = True, len(job.stores) > 1 or len(runs or ()) < 2
    while True:
        laid_out, ranges = lay_out(spark, job, plain, footers, presorted=presorted)
        checked = ranges not in ("spark-sample", "parquet-sorted")
        as_read = ranges == "parquet-sorted" and not sort
        if not as_read:  # one store per partition when checked, else a partition may hold several
            by = ["sk"] if checked else ["store", "k" if ranges == "spark-sample" else "sk"]
            laid_out = laid_out.sortWithinPartitions(*by, "fi", "bs", "id")
        phases.setdefault("plan_s", round(time.monotonic() - began - phases["session_s"], 3))
        t0 = time.monotonic()
        try:
            rows = (laid_out.select("store", "k", "v", *entry_digest_columns(), *(["pid"] if checked else []))
                    .mapInArrow(WriteArrow(job, written, as_read=as_read), "task string").collect())
        except Exception as e:
            if not as_read or OUT_OF_ORDER not in str(e):
                raise
            _clear_written(job)
            phases["unsorted_attempt_s"], sort = round(time.monotonic() - t0, 3), True
            continue
        phases["write_s"] = round(time.monotonic() - t0, 3)
        tasks = [json.loads(row.task) for row in rows]
        overlap = _overlap(job, tasks)
        if overlap is None:
            return tasks, ranges
        if ranges != "parquet-sorted":
            raise BuildError(f"the build's files overlap: {overlap}")
        _clear_written(job)
        phases["sorted_attempt_s"] = phases.pop("write_s")
        presorted = False


def _overlap(job: BuildJob, tasks: list[dict[str, Any]]) -> str | None:
    """Where two files of one store overlap (the first such pair), else None: every key of a store is in
    one file, and a key's rows were all sorted in one task."""
    ranges: dict[Any, list[tuple[str, str, str]]] = {}
    for t in tasks:
        for f in t["files"]:
            d = f["digest"]
            ranges.setdefault(t["store"], []).append((d["first_key"], d["last_key"], f["file"]))
    for store, got in ranges.items():
        got.sort(key=lambda r: bytes.fromhex(r[0]))
        for a, b in zip(got, got[1:]):
            if bytes.fromhex(a[1]) >= bytes.fromhex(b[0]):
                return f"{a[2]} and {b[2]} of store {'all' if store is None else store}"
    return None


def _clear_written(job: BuildJob) -> None:
    """Remove what an attempt wrote into out_dir (staged files are replaced, and the rest deleted with the
    build's staging prefix, by statectl.spark.submit.run_build)."""
    for p in job.out_dir.iterdir():
        if p.name.startswith((SST_PREFIX, f".{SST_PREFIX}")) and p.is_file():
            p.unlink(missing_ok=True)


def _session(job: BuildJob) -> tuple[Any, Any]:
    """The SparkSession and the Parquet footers of a files build (None otherwise: statectl.spark.footers),
    these read in a thread while the session starts (the JVM's start leaves the second core idle), with
    the key column's sample (Footers.key_sample) and the driver's imports that the plan needs."""
    import threading

    from pyspark.sql import SparkSession

    got: dict[str, Any] = {}

    def read() -> None:
        got["footers"] = footers = read_footers(job)
        if footers is not None and job.spec.kv.key_column:
            prefetch_parquet_sample(job, footers)
        try:
            import pandas  # noqa: F401 - mapInArrow imports it (pyspark checks its version)
        except ImportError:
            pass  # mapInArrow says so

    t = threading.Thread(target=read, name="statectl-footers", daemon=True)
    t.start()
    spark = SparkSession.builder.getOrCreate()
    t.join()
    return spark, got.get("footers")


def _warm_workers(spark: Any) -> None:
    """Start the Python workers of the write stage now (writer.Warm, :func:`_warm_in_background`), so the write
    stage's tasks find them ready instead of starting their own while the driver still plans."""
    _warm_in_background(spark.sparkContext,
                        lambda cores: spark.range(0, cores, 1, cores).mapInArrow(Warm(), "id long").collect())


def _quietly(fn: Any) -> None:
    try:
        fn()
    except Exception:  # noqa: BLE001 - only a head start: the build's own tasks start workers anyway
        pass


def _no_adaptive_plan(spark: Any) -> None:
    """Adaptive query execution off (unless the user set it): the write's plan has one fixed shuffle into the
    partitions it names, which AQE would only plan again between its two stages."""
    if not spark.sparkContext.getConf().contains(_AQE):
        spark.conf.set(_AQE, "false")


_AQE = "spark.sql.adaptive.enabled"


def _finish(job: BuildJob, tasks: list[dict[str, Any]], began: float, path: str = "python",
            sources: list[dict[str, Any]] | None = None, ranges: str | None = None,
            source_digest: Digest | None = None, phases: dict[str, float] | None = None) -> dict[str, Any]:
    """Write the manifest (submit.BuildManifest) made of the tasks' records; ``path``: how the entries were
    made, "jvm" (plain_frame), "split" (a rescale) or "python"; ``sources``: what a snapshots build read from each
    source, ``source_digest``: the Digest of all they read; ``ranges``: where the JVM path's key ranges came
    from (BuildManifest.ranges); ``phases``: the driver's (BuildManifest.phases). Returns its document."""
    spec = job.spec
    per_store = {s: StoreBuild(s, [], 0, 0, Digest()) for s in job.stores}
    files = []
    for t in tasks:
        s = per_store[t["store"]]
        s.rows += t["rows"]
        s.duplicates += t["duplicates"]
        for f in t["files"]:
            built = BuildFile.from_json(f)
            s.digest.merge(built.digest)
            files.append(built)
    # in key order: a task's files are named by its partition, which is key order but where the dataset was
    # laid out as it was read (_write_jvm)
    files.sort(key=lambda f: (job.store_index[f.store], f.digest.first_key or b"", f.name))
    for s in per_store.values():
        s.files = [f.name for f in files if f.store == s.store]
    offsets = {p: spec.ranges[p][1] for p in spec.partitions} if spec.source == "topic" and spec.ranges else {}
    manifest = BuildManifest(job.spec_hash, job.out_dir, list(per_store.values()), files,
                             offsets, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                             round(time.monotonic() - began, 3), path=path, ranges=ranges or "",
                             sources=sources or [], build_id=job.build_id, source_digest=source_digest,
                             phases={**(phases or {}), "driver_s": round(time.monotonic() - began, 3)})
    doc = manifest.to_dict()
    # unique: the temporary file is then .BUILD-MANIFEST.json.<pid>.tmp, a name a build dir may hold (what a
    # kill leaves there must not make the dir look like something else: engine.adstore.builds.is_build_dir)
    write_atomic(job.out_dir / BUILD_MANIFEST, json.dumps(doc, indent=2) + "\n", unique=True)
    return doc


_EXC_LINE = re.compile(r"^\s*(?:[A-Za-z_][\w.$]*\.)?[A-Z]\w*(?:Error|Exception)(?:\[[\w.]+\])?: (.+)$")
_READING = re.compile(r"while reading file (\S+?)\.?(?:\s|$)")


def _java_messages(e: BaseException) -> list[str]:
    """The messages of a Py4JJavaError's Java exception and its causes, outermost first."""
    out: list[str] = []
    je = getattr(e, "java_exception", None)
    while je is not None and len(out) < 20:
        try:
            out.append(str(je.getMessage() or ""))
            je = je.getCause()
        except Exception:
            break
    return out


def summarize(e: BaseException) -> str:
    """One line for an exception that ended the build: a BuildError's own message wherever it was raised
    (an executor's traceback travels in the exception's text, or in its Java causes), else the innermost
    Java cause (with the file being read, when Spark names one), else the last exception line."""
    if isinstance(e, BuildError):
        return str(e)
    java = _java_messages(e)
    text = "\n".join([str(e), *java])
    found = re.findall(r"BuildError: (.+)", text)
    if found:
        return found[0].strip()
    inner = [m for m in java if m.strip()]
    if inner:
        line = re.sub(r"\s*SQLSTATE: \w+\s*$", "", inner[-1].strip().splitlines()[0])
        reading = next((m.group(1) for m in map(_READING.search, java) if m), None)
        if reading and reading not in line:
            line = f"{local_path(reading)}: {line}"
        return line[:500]
    lines = [m.group(0).strip() for m in map(_EXC_LINE.match, text.splitlines()) if m]
    return (lines or [one_line(e)])[-1][:500]


def main(argv: list[str]) -> int:
    """``job.py <job file>``: build, and exit 0; on failure print the one-line error after ERROR_MARK and exit 1.
    ``job.py <job file> --when-written-by <pid>``: a rescale whose job file process pid writes later
    (:func:`rescale_when_written`)."""
    waits = len(argv) == 3 and argv[1] == WHEN_WRITTEN and argv[2].isdigit()
    if len(argv) != 1 and not waits:
        print(f"{ERROR_MARK}usage: job.py <job file> [{WHEN_WRITTEN} <pid>]", file=sys.stderr)
        return 2
    try:
        if waits:
            rescale_when_written(Path(argv[0]), int(argv[2]))
        else:
            build(json.loads(Path(argv[0]).read_text()))
    except KeyboardInterrupt:
        print(f"{ERROR_MARK}interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        print(f"{ERROR_MARK}{summarize(e)}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    # Run as a script, this dir is sys.path[0]; the package's modules must be imported as statectl.spark.*.
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]
    from statectl.spark.job import main as _main

    sys.exit(_main(sys.argv[1:]))
