"""statectl doctor: the probes of engine.doctor, one line per check."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from statectl.cli.base import exit_codes_epilog
from statectl.cli.common import BLOBSTORE, Env, state_command
from statectl.errors import StatectlError

EPILOG = (
    "Examples:\n\n"
    "  statectl doctor   # the profile's blob store, rocksdict, Java\n\n"
    "  statectl doctor --blobstore s3://backups/samza --kafka broker:9092 --job page-views "
    "--state-dir /var/samza/state\n\n"
    "  STATECTL_RETRIES=1 statectl doctor -o json   # in CI: a quick verdict as JSON\n\n"
    "Every check prints one line (ok, FAIL or skip), with a hint under a failure; a check with nothing to "
    "check (no --kafka, no --job, no --state-dir, no pyspark) is skipped. The probes it writes (a record "
    "under doctor/, a blob with a TTL, a file in the state dir) are removed again.\n\n"
    + exit_codes_epilog((0, "no check failed (skips are fine)"), (1, "some check failed"),
                        (2, "usage (bad flags or config)"))
)

_STATUS = {"ok": "ok", "fail": "FAIL", "skip": "skip"}


@state_command(*BLOBSTORE, "kafka", "job", "job_id", "state_dir")
def doctor(
    env: Env,
    timeout: Annotated[Optional[float], typer.Option("--timeout", help="Seconds to wait for the Kafka brokers (and for a TCP connection to the S3 endpoint) (default 5).", show_default=False)] = None,
) -> None:
    """Check what the operations need: the blob store (reachable, credentials, writable, TTL tagging),
    the Kafka brokers and the job's checkpoint and coordinator topics, rocksdict, Java and pyspark, the
    state dir. One line per check. See man statectl-doctor or docs/backup.md."""
    from statectl.engine.doctor import DoctorOptions
    from statectl.engine.doctor import doctor as run_doctor

    s = env.settings
    opts = DoctorOptions(blobstore_url=s.blobstore, s3_endpoint=s.s3_endpoint, kafka=s.kafka, job=s.job,
                         job_id=s.job_id, state_dir=Path(s.state_dir) if s.state_dir else None,
                         kafka_security=env.session.kafka_security if s.kafka else None,
                         **({} if timeout is None else {"timeout_s": timeout}))
    r = run_doctor(opts, lambda: env.session.blobstore)
    width = max(len(c.name) for c in r.checks) + 2
    lines = []
    for c in r.checks:
        lines.append(f"{_STATUS.get(c.status, c.status):<5}{c.name:<{width}}{c.detail}")
        if c.hint and c.status == "fail":
            lines.append(f"{'':<5}{'':<{width}}hint: {c.hint}")
    failed = r.failed
    skipped = sum(c.status == "skip" for c in r.checks)
    if failed:
        lines.append(f"{len(failed)} of {len(r.checks)} checks failed: {', '.join(c.name for c in failed)}")
    else:
        lines.append(f"all checks passed ({len(r.checks) - skipped} ok, {skipped} skipped)")
    env.emit(r, "\n".join(lines))
    if failed:
        raise StatectlError(f"doctor: {len(failed)} check{'s' if len(failed) != 1 else ''} failed: "
                            + ", ".join(c.name for c in failed))
