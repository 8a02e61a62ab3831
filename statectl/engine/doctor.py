"""doctor: check what the operations need, and say in one line each what is wrong.

Each adapter examines itself through its ``probe`` module; doctor runs them side by side (an endpoint that
does not answer costs its own timeout, not the sum of them all) and reports them in this order (the check
names are stable; JSON consumers key on them):

- ``blob store`` (statectl.blobstore.probe): list, write, read back and delete a probe record under
  ``doctor/``; write, read back, TTL-check, un-TTL and delete a probe blob.
- ``kafka``, ``checkpoint topic``, ``coordinator topic`` (statectl.kafka.probe): the brokers answer; with a
  job, its Samza topics exist with one partition, and the checkpoint topic is read for checkpoints the job
  would ignore (v2 only, while Samza reads v1 by default).
- ``rocksdict`` (statectl.rocks.probe): open, write, read back and close a store in a temporary dir.
- ``java``, ``spark`` (statectl.spark.probe): ``java -version`` runs, pyspark imports with its
  spark-submit; skipped (not failed) while pyspark is not installed.
- ``state dir`` (statectl.local.probe): exists or can be created, takes a file and a hard link.

A check that has nothing to check (no ``--kafka``, no ``--state-dir``) is skipped. Every probe the checks
write is removed again (see each probe module for what a crash could leave and who removes it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable

from statectl.blobstore import probe as blobstore_probe
from statectl.blobstore.probe import DOCTOR_PREFIX, PROBE_TTL_SECONDS, BlobStoreSource
from statectl.errors import UsageError
from statectl.kafka import probe as kafka_probe
from statectl.local import probe as local_probe
from statectl.parallel import run_parallel
from statectl.probe import FAIL, OK, SKIP, UNEXPECTED_HINT, Check
from statectl.rocks import probe as rocks_probe
from statectl.spark import probe as spark_probe

__all__ = ["CHECK_NAMES", "DOCTOR_PREFIX", "FAIL", "OK", "SKIP", "Check", "DoctorOptions", "DoctorResult", "doctor",
           "probes"]

# (the names a probe reports, in order; the probe) -- a probe returns one Check per name.
Probe = tuple[tuple[str, ...], Callable[[], list[Check]]]

CHECK_NAMES = (blobstore_probe.NAMES + kafka_probe.NAMES + rocks_probe.NAMES + spark_probe.NAMES
               + local_probe.NAMES)


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
    itself is handed to :func:`doctor`); the rest selects and configures the other checks.
    ``kafka_security`` is a statectl.kafka.client.KafkaSecurity (None: PLAINTEXT)."""

    blobstore_url: str
    s3_endpoint: str | None = None
    kafka: str | None = None
    job: str | None = None
    job_id: str = "1"
    state_dir: Path | None = None
    timeout_s: float = 5.0
    probe_ttl_seconds: int = PROBE_TTL_SECONDS
    kafka_security: Any = None

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


def probes(opts: DoctorOptions, blobstore: BlobStoreSource) -> list[Probe]:
    """The probes ``opts`` asks for, in CHECK_NAMES order, each with the names of the checks it reports."""
    return [
        (blobstore_probe.NAMES, partial(blobstore_probe.probe, blobstore, url=opts.blobstore_url,
                                        s3_endpoint=opts.s3_endpoint, ttl_seconds=opts.probe_ttl_seconds,
                                        timeout_s=opts.timeout_s)),
        (kafka_probe.NAMES, partial(kafka_probe.probe, opts.kafka, job=opts.job, job_id=opts.job_id,
                                    timeout_s=opts.timeout_s, security=opts.kafka_security)),
        (rocks_probe.NAMES, rocks_probe.probe),
        (spark_probe.NAMES, spark_probe.probe),
        (local_probe.NAMES, partial(local_probe.probe, opts.state_dir)),
    ]


def doctor(opts: DoctorOptions, blobstore: BlobStoreSource) -> DoctorResult:
    """Run every check (see the module doc) and return their outcomes, one per name in CHECK_NAMES order.

    ``blobstore`` is the store to probe, or a function that opens it (so that a store that cannot even
    be opened is reported as a failed check); the caller closes it. A failing check never stops the
    others: a probe that raises fails each of its checks. Raises UsageError for bad options, and when
    opening the blob store says its URL is bad: those are usage errors, not findings. Leaves nothing
    behind (see the module doc).
    """
    opts.validate()
    tasks = [lambda _cancel, names=names, run=run: _run(names, run) for names, run in probes(opts, blobstore)]
    ran = run_parallel(tasks, parallelism=len(tasks))
    checks = [check for got in ran for check in got]
    return DoctorResult(ok=not any(c.status == FAIL for c in checks), checks=checks)


def _run(names: tuple[str, ...], run: Callable[[], list[Check]]) -> list[Check]:
    try:
        got = run()
    except UsageError:
        raise
    except Exception as e:  # a probe that breaks its promise never to raise is still one finding, not a crash
        detail = f"the probe failed: unexpected {type(e).__name__}: {e}".splitlines()[0]
        return [Check(name, FAIL, detail, getattr(e, "hint", None) or UNEXPECTED_HINT) for name in names]
    if [c.name for c in got] != list(names):
        raise AssertionError(f"a probe reported {[c.name for c in got]} instead of {list(names)}")
    return got
