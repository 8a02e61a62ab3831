"""The PySpark application of ``adstore load --spark`` and ``rescale``, run by spark-submit
(statectl.spark.submit): ``spark-submit ... statectl/spark/job.py <out_dir>/BUILD-JOB.json``. This is the
driver: :func:`build` reads the source (statectl.spark.sources, statectl.spark.rescale_reader), lays the
entries out as the target stores are (Kafka's partitioner for partitioned file builds; a topic's own
partition; a rescale's partitioner), sorts each by key bytes (then by source order: the last row or record
of a key wins, a None value leaves the key out), has the executors write SST files (statectl.spark.writer)
into out_dir, or through the blob store when ``staging`` names one, and writes ``BUILD-MANIFEST.json`` into
out_dir last (tmp + rename). While it runs, its status (stages done, rows written) goes to stderr as status
lines (statectl.spark.status).

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

from statectl.formats.adstore import MASK64, Digest
from statectl.fsutil import write_atomic
from statectl.spark.context import BuildError, BuildJob, local_path, one_line
from statectl.spark.frames import arrow_batches, lay_out, plain_frame, to_partitions, with_sort_key
from statectl.spark.rescale_reader import CheckTargets, snapshots_frame
from statectl.spark.sampler import FilePartitioner, file_bounds
from statectl.spark.sources import files_rdd, topic_rdd
from statectl.spark.status import StatusLines
from statectl.spark.launch import ERROR_MARK
from statectl.spark.submit import BUILD_MANIFEST, BuildFile, BuildManifest, StoreBuild
from statectl.spark.writer import WriteArrow, WriteFiles, entry_digest_columns


def build(doc: dict[str, Any]) -> dict[str, Any]:
    """Run the build the job document asks for; write and return the manifest."""
    from pyspark import StorageLevel
    from pyspark.sql import SparkSession

    began = time.monotonic()
    job = BuildJob(doc)
    spec = job.spec
    spark = SparkSession.builder.getOrCreate()
    try:
        sc = spark.sparkContext
        sc.setLogLevel("WARN")
        written = sc.accumulator(0)  # rows the finished tasks wrote: the build's status
        with StatusLines(sc, written):
            if spec.source == "snapshots":
                tasks, sources, digest = _rescale(spark, job, written)
                return _finish(job, tasks, began, "jvm", sources=sources, source_digest=digest)
            plain = plain_frame(spark, job)
            if plain is not None:
                arrow_batches(spark, job)
                laid_out, ranges = lay_out(spark, job, plain)
                checked = ranges != "spark-sample"
                # one store per partition when checked (with_sort_key's sk), else the ranges may span two
                laid_out = laid_out.sortWithinPartitions(*(["sk"] if checked else ["store", "k"]), "fi", "bs", "id")
                rows = (laid_out.select("store", "k", "v", *entry_digest_columns(), *(["pid"] if checked else []))
                        .mapInArrow(WriteArrow(job, written), "task string").collect())
                tasks = [json.loads(row.task) for row in rows]
                return _finish(job, tasks, began, "jvm", ranges=ranges)
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
    return _finish(job, tasks, began)


_ADAPTIVE = "spark.sql.adaptive.enabled"


def _rescale(spark: Any, job: BuildJob,
             written: Any = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]], Digest]:
    """A snapshots build: the sources' entries, read and routed in Arrow batches (rescale_reader), shuffled to
    their target's partition, sorted by key (frames.with_sort_key: most keys begin with spec.key_prefix), and
    written by the executors, which check that every key is their target's. Returns the write tasks' records,
    what each source's reader counted, and the Digest of every entry the readers gave the JVM (summed as they
    pass, before the shuffle: the targets' digests, summed after it by the writers, must add up to it).
    ``written``: the accumulator of rows written (the build's status)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    spec = job.spec
    if not spark.sparkContext.getConf().contains(_ADAPTIVE):
        # the shuffle's partitions are the targets: nothing to re-plan once the read stage ends (one job, not two)
        spark.conf.set(_ADAPTIVE, "false")
    entries, stats = snapshots_frame(spark, job)
    seen = Observation("sources")
    # Digest.checksum = sum(hk << 32 | hl) = (sum(hk) << 32) + sum(hl) mod 2**64; bigint sums of 32-bit CRCs
    # cannot overflow below 2**31 entries (and fail the job, never wrap, in Spark's ANSI mode above)
    hk, hl = (F.crc32(F.col("k")), entry_digest_columns()[1])
    entries = entries.observe(seen, F.count(F.lit(1)).alias("rows"), F.sum(hk).alias("hk"), F.sum(hl).alias("hl"))
    laid_out = to_partitions(entries.withColumn("pid", F.col("store")), len(job.stores))
    laid_out = with_sort_key(laid_out, [bytes.fromhex(spec.key_prefix)] * len(job.stores)).sortWithinPartitions("sk")
    written = (laid_out.select("store", "k", "v", *entry_digest_columns(), "pid")
               .mapInArrow(WriteArrow(job, written, CheckTargets(job)), "task string").collect())
    got = seen.get
    read = stats.value
    sources = [read[i] for i in sorted(read)]
    if len(sources) != len(spec.snapshots):
        raise BuildError(f"read {len(sources)} of the {len(spec.snapshots)} source snapshots")
    keys = sum(int(s["keys"]) for s in sources)
    if int(got["rows"] or 0) != keys:
        raise BuildError(f"the readers gave {keys} entries of the sources, the Spark job saw {got['rows']}")
    checksum = ((int(got["hk"] or 0) << 32) + int(got["hl"] or 0)) & MASK64
    return [json.loads(row.task) for row in written], sources, Digest(keys, None, None, checksum)


def _finish(job: BuildJob, tasks: list[dict[str, Any]], began: float, path: str = "python",
            sources: list[dict[str, Any]] | None = None, ranges: str | None = None,
            source_digest: Digest | None = None) -> dict[str, Any]:
    """Write the manifest (submit.BuildManifest) made of the tasks' records; ``path``: how the entries were
    made, "jvm" (plain_frame, a rescale) or "python"; ``sources``: what a snapshots build read from each
    source, ``source_digest``: the Digest of all they read; ``ranges``: where the JVM path's key ranges came
    from (BuildManifest.ranges). Returns its document."""
    spec = job.spec
    per_store = {s: StoreBuild(s, [], 0, 0, Digest()) for s in job.stores}
    files = []
    for t in tasks:
        s = per_store[t["store"]]
        s.rows += t["rows"]
        s.duplicates += t["duplicates"]
        for f in t["files"]:
            built = BuildFile.from_json(f)
            s.files.append(built.name)
            s.digest.merge(built.digest)
            files.append(built)
    for s in per_store.values():
        s.files.sort()
    offsets = {p: spec.ranges[p][1] for p in spec.partitions} if spec.source == "topic" and spec.ranges else {}
    manifest = BuildManifest(job.spec_hash, job.out_dir, list(per_store.values()), sorted(files, key=lambda f: f.name),
                             offsets, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                             round(time.monotonic() - began, 3), path=path, ranges=ranges or "",
                             sources=sources or [], build_id=job.build_id, source_digest=source_digest)
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
    """``job.py <job file>``: build, and exit 0; on failure print the one-line error after ERROR_MARK and exit 1."""
    if len(argv) != 1:
        print(f"{ERROR_MARK}usage: job.py <job file>", file=sys.stderr)
        return 2
    try:
        doc = json.loads(Path(argv[0]).read_text())
        build(doc)
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
