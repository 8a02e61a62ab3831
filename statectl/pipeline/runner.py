"""Running a job: its coordinator (one process per deployment) and its containers (one per stage).

The coordinator is what Samza's job coordinator does for a deployment: it picks the run id
(``<millis>-<8 hex>``, or the one given), publishes the job's config with it to the coordinator stream
(set-config, as JobRunner does), creates the intermediate and changelog topics, starts one container
process per stage and restarts a container that dies (a kill in the middle of a drain included: the
restarted container finds the drain and resumes it). When every container has exited cleanly after a
drain, or after every task reached the end of its bounded inputs, it tombstones the drain notifications of
its run (Samza's DrainUtils.cleanup) and the run's book-keeping and exits 0. When the run starts it
records where each bounded source partition ends and where each intermediate partition begins
(pipeline.control.RunBounds); a restarted container reads to the same ends.
SIGTERM or SIGINT stops the containers (no drain, no cleanup) and exits 143/130.

:func:`main` is a job script's entry point: ``run`` (the coordinator) and ``container`` (what the
coordinator starts), so that a job is one Python file: ``python job.py run --kafka HOST:PORT
--state-dir DIR [--blobstore URL] [--run-id ID]``.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from statectl.errors import StatectlError
from statectl.formats.coordinator import new_run_id
from statectl.kafka.client import create_topic
from statectl.kafka.coordinator import CoordinatorStream
from statectl.pipeline.control import DRAIN_STATES_NAMESPACE, RUN_BOUNDS_NAMESPACE, RunBounds, save_run_bounds
from statectl.pipeline.spec import SETTABLE_HELP, JobSpec, settable, stage_partitions, task_name, with_config

log = logging.getLogger("statectl.pipeline")

RESTART_LIMIT = 10
EXIT_DRAINED = 0


def prepare(job: JobSpec, bootstrap: str, run_id: str, security=None, overrides: dict[str, str] | None = None) -> None:
    """Publish the job's config for ``run_id`` (with ``overrides``), create its coordinator, intermediate
    and changelog topics (those that exist are left as they are) and record the run's bounds (kept when
    the run has them already)."""
    with CoordinatorStream(bootstrap, job.name, job.job_id, security=security) as cs:
        cs.create()
        cs.write_config({**job.config(run_id), **(overrides or {})})
    for topic, partitions in job.intermediate.items():
        create_topic(bootstrap, topic, partitions=partitions, security=security)
    from statectl.kafka.client import open_consumer, partition_count

    consumer = open_consumer(bootstrap, security=security)
    try:
        counts = {}
        for stage in job.stages:
            for topic in stage.inputs:
                n = job.intermediate.get(topic) or partition_count(consumer, topic, bootstrap)
                if n is None:
                    raise StatectlError(f"input topic {topic} of job {job.name} does not exist on {bootstrap}")
                counts[topic] = n
        for stage in job.stages:
            for store in stage.stores:
                create_topic(bootstrap, job.changelog_topic(store), partitions=stage_partitions(stage, counts),
                             configs={"cleanup.policy": "compact"}, security=security)
        bounds = _run_bounds(with_config(job, overrides or {}), run_id, consumer, counts, bootstrap)
    finally:
        consumer.close()
    _write_changelog_mapping(job, bootstrap, counts, security)
    with CoordinatorStream(bootstrap, job.name, job.job_id, security=security) as cs:
        cs.require()
        save_run_bounds(cs, bounds)


def _run_bounds(job: JobSpec, run_id: str, consumer, counts: dict[str, int], bootstrap: str) -> RunBounds:
    """The true ends (kafka.tails: Tansu under-reports its end offsets), now, of the bounded sources and of
    the intermediate streams."""
    from statectl.kafka.tails import read_tails

    def ends(topic: str) -> dict[int, int]:
        parts = list(range(counts.get(topic) or job.intermediate[topic]))
        return {p: tail.end for p, tail in read_tails(consumer, topic, parts, bootstrap).items()}

    return RunBounds(run_id, {t: ends(t) for t in job.bounded}, {t: ends(t) for t in job.intermediate})


def _write_changelog_mapping(job: JobSpec, bootstrap: str, counts: dict[str, int], security=None) -> None:
    """Map each task of a stage with stores to its changelog partition (task ``<stage>-Partition n`` writes
    to partition n) on the coordinator stream, as Samza's job coordinator does the first time it sees a
    task: a task already mapped keeps its partition (ChangelogStreamManager.updatePartitionMapping). So
    statectl's standby finds a pipeline task's partition as it finds a Samza task's."""
    with CoordinatorStream(bootstrap, job.name, job.job_id, security=security) as cs:
        cs.require()
        mapped = cs.changelog_partitions()
        for stage in job.stages:
            if not stage.stores:
                continue
            for p in range(stage_partitions(stage, counts)):
                name = task_name(stage.name, p)
                if name not in mapped:
                    cs.write_changelog_partition(name, p)


def cleanup(job: JobSpec, bootstrap: str, run_id: str, security=None) -> list[str]:
    """Tombstone the drain notifications of ``run_id`` (DrainUtils.cleanup), the drain and end-of-stream
    states saved for it and its bounds; return the uuids cleared."""
    cleared = []
    with CoordinatorStream(bootstrap, job.name, job.job_id, security=security) as cs:
        cs.require()
        for rec in cs.notifications():
            if not rec.cleared and rec.run_id == run_id:
                cs.clear_notification(rec.uuid)
                cleared.append(rec.uuid)
        for key, value in cs.namespace_values(DRAIN_STATES_NAMESPACE).items():
            if value is not None and run_id.encode() in value:
                cs.put(DRAIN_STATES_NAMESPACE, key, None)
        if cs.namespace_values(RUN_BOUNDS_NAMESPACE).get(run_id) is not None:
            cs.put(RUN_BOUNDS_NAMESPACE, run_id, None)
    return cleared


def coordinate(job: JobSpec, *, bootstrap: str, state_dir: Path, blobstore: str | None, run_id: str | None,
               entry: list[str], env: dict[str, str] | None = None, overrides: dict[str, str] | None = None,
               security=None) -> int:
    """Run one deployment of ``job`` (see the module doc) with config ``overrides``; return the process
    exit code."""
    run_id = run_id or new_run_id()
    with_config(job, overrides or {})  # a bad value fails here, before anything starts
    prepare(job, bootstrap, run_id, security=security, overrides=overrides)
    log.warning("job %s-%s: run %s", job.name, job.job_id, run_id)
    stopping: list[int] = []

    def stop(signum, frame) -> None:  # noqa: ARG001 - signal handler signature
        stopping.append(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def spawn(stage: str) -> subprocess.Popen:
        args = [*entry, "container", "--stage", stage, "--kafka", bootstrap, "--state-dir", str(state_dir),
                "--run-id", run_id]
        if blobstore:
            args += ["--blobstore", blobstore]
        return subprocess.Popen(args, env=env, preexec_fn=_die_with_parent)

    code = _supervise(job, spawn, stopping)
    if code is not None:
        return code
    cleared = cleanup(job, bootstrap, run_id, security=security)
    log.warning("job %s-%s finished; cleared drain notification(s) %s", job.name, job.job_id,
                ", ".join(cleared) or "none")
    return 0


def _supervise(job: JobSpec, spawn: Callable[[str], subprocess.Popen], stopping: list[int]) -> int | None:
    """Start a container per stage and restart one that fails, until every stage has finished (None); or
    the exit code when a signal in ``stopping`` stops them, or a stage fails more than RESTART_LIMIT times.
    No container outlives it."""
    children = {s.name: spawn(s.name) for s in job.stages}
    restarts = {s.name: 0 for s in job.stages}
    done: set[str] = set()
    try:
        while len(done) < len(job.stages):
            if stopping:
                for p in children.values():
                    if p.poll() is None:
                        p.terminate()
                for p in children.values():
                    p.wait(timeout=60)
                return 128 + stopping[0]
            for name, p in list(children.items()):
                code = p.poll()
                if code is None or name in done:
                    continue
                if code == EXIT_DRAINED:
                    done.add(name)
                    log.warning("stage %s finished (drained, or its inputs ended)", name)
                    continue
                restarts[name] += 1
                if restarts[name] > RESTART_LIMIT:
                    log.error("stage %s failed %d times; giving up", name, restarts[name])
                    for other in children.values():
                        if other.poll() is None:
                            other.terminate()
                    return 1
                log.warning("stage %s exited with %s; restarting it", name, code)
                children[name] = spawn(name)
            time.sleep(0.2)
    finally:
        for p in children.values():
            if p.poll() is None:
                p.kill()
    return None


def _die_with_parent() -> None:
    """In a container process, before exec: SIGTERM it when its coordinator dies (Linux prctl
    PR_SET_PDEATHSIG), so that a killed coordinator leaves no container running on."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass  # not Linux: containers outlive a killed coordinator


def main(job: JobSpec, argv: list[str] | None = None) -> int:
    """The command line of a job script: ``run`` or ``container`` (see the module doc)."""
    parser = argparse.ArgumentParser(prog=Path(sys.argv[0]).name, description=f"the {job.name} job")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "container"):
        p = sub.add_parser(name)
        p.add_argument("--kafka", required=True, help="bootstrap servers")
        p.add_argument("--state-dir", required=True, type=Path, help="the job's state base dir")
        p.add_argument("--blobstore", help="where snapshots go (default: statectl's embedded default)")
        p.add_argument("--run-id", required=name == "container", help="the deployment's run id")
        if name == "container":
            p.add_argument("--stage", required=True)
        else:
            p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                           help=f"set a config key of the deployment ({SETTABLE_HELP})")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(process)d %(message)s", stream=sys.stderr)
    try:
        if args.command == "run":
            overrides = {}
            for item in args.config:
                key, sep, value = item.partition("=")
                if not sep or not settable(key):
                    parser.error(f"--config {item!r}: expected KEY=VALUE with KEY one of {SETTABLE_HELP}")
                overrides[key] = value
            entry = [sys.executable, os.path.abspath(sys.argv[0])]
            from statectl.session import Session

            security = Session.from_env(kafka=args.kafka).kafka_security
            try:
                return coordinate(job, bootstrap=args.kafka, state_dir=args.state_dir, blobstore=args.blobstore,
                                  run_id=args.run_id, entry=entry, overrides=overrides, security=security)
            except ValueError as e:
                parser.error(str(e))
        from statectl.pipeline.container import Container
        from statectl.pipeline.state import Runtime
        from statectl.session import Session

        # The job writes its state's snapshots, as backup --create does: its first run starts the blob store.
        session = Session.from_env(kafka=args.kafka, blobstore=args.blobstore, job=job.name, job_id=job.job_id,
                                   create_blobstore=True)
        try:
            Container(job, args.stage, Runtime(args.kafka, args.state_dir, args.run_id, session)).run()
        finally:
            session.close()
        return EXIT_DRAINED
    except StatectlError as e:
        sys.stderr.write(f"Error: {e}\n")
        return e.exit_code
