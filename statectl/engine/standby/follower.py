"""The settings a standby follower runs with, as its status file records them, and starting it again from them.

A promote that fenced a follower and then failed starts it again. What it starts is statectl itself, the one
running (``sys.executable -m statectl standby follow``), with flags rebuilt from the typed fields the
follower recorded (:class:`FollowerSettings`), checked again when read and against the replica promoted:
never a command line or a working dir read from a file, which whoever can write the state dir would choose.

Secrets are never recorded. The restarted follower takes them from the config file its follower was
started with (recorded by path) and from the promote's own environment: its secret STATECTL_* variables
(redact.SECRET_ENV) and everything that is not STATECTL_* (AWS_* for botocore). Every other STATECTL_*
variable of the promote is dropped, so that the promote's own settings (an operator's STATECTL_STATE_DIR)
never become the follower's. Whether it came back (it holds the replica's lock) is checked and said; when
it did not, the command that starts it is said instead.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from statectl.redact import SECRET_ENV


# The settings a follower runs with that `standby follow` takes no flag for: passed as STATECTL_* variables.
# Secrets (passwords, keys, tokens) are not among them.
ENV_SETTINGS = ("s3_region", "s3_profile", "sse", "sse_kms_key_id", "kafka_security_protocol", "kafka_sasl_mechanism",
                "kafka_sasl_username", "kafka_ssl_cafile", "kafka_ssl_certfile", "kafka_ssl_keyfile", "kafka_ssl_check_hostname", "timeout",
                "retries", "retry_time", "parallelism", "chunk_size", "limit_rate")


LAYOUTS = ("standby-root", "active-path")


RESTART_WAIT_S = 30.0  # how long a restarted follower has to take the replica's lock before promote says so


@dataclass(frozen=True)
class FollowerSettings:
    """What ``statectl standby follow`` ran with (its effective settings, wherever each came from), enough to
    start it again: the kafka bootstrap, the job, the task (or ``container``: a container follower) and
    store (None for a container follower of every store), the state dir and the standby root it was given
    (None: the default beside the state dir), the changelog (``<system>.<topic>``)
    and partition of a one-task follower, and its options. ``config_file`` and ``profile``: where its secrets
    are read from again. ``settings``: values of ENV_SETTINGS, as a config file writes them."""

    kafka: str
    job: str
    job_id: str
    state_dir: str | None = None
    standby_root: str | None = None
    zookeeper: str | None = None
    task: str | None = None
    store: str | None = None
    container: str | None = None
    changelog: str | None = None
    partition: int | None = None
    replica: int = 0
    replica_dir: str | None = None
    layout: str = "standby-root"
    to_checkpoint: bool = False
    pre_restore: bool = False
    blobstore: str | None = None
    s3_endpoint: str | None = None
    metrics_port: int | None = None
    metrics_addr: str | None = None
    config_file: str | None = None
    profile: str | None = None
    settings: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_json(cls, obj: Any) -> FollowerSettings | None:
        """The settings a status file records, each field checked for its type and shape; None when there are
        none (a status file of an older statectl) or any field is not what a follower records."""
        if not isinstance(obj, dict) or set(obj) - {f.name for f in fields(cls)}:
            return None
        try:
            out = cls(**obj)
        except TypeError:
            return None
        return out if out.problem() is None else None

    def problem(self) -> str | None:
        """What is wrong with a field (None: nothing)."""
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.name not in ("kafka", "job", "job_id"):
                continue
            if f.name in ("partition", "replica", "metrics_port"):
                if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 65535:
                    return f"{f.name}: not a number from 0 to 65535"
            elif f.name in ("to_checkpoint", "pre_restore"):
                if not isinstance(value, bool):
                    return f"{f.name}: not true or false"
            elif f.name == "settings":
                if not isinstance(value, dict) or not all(
                        k in ENV_SETTINGS and _text(v) for k, v in value.items()):
                    return "settings: not settings a follower records"
            elif not _text(value):
                return f"{f.name}: not a line of text"
        for name in ("state_dir", "standby_root", "replica_dir", "config_file"):
            value = getattr(self, name)
            if value is not None and not os.path.isabs(value):
                return f"{name}: not an absolute path"
        if self.layout not in LAYOUTS:
            return f"layout: not one of {', '.join(LAYOUTS)}"
        return None

    def argv(self) -> list[str]:
        """The command line that starts this follower: this statectl, its flags with their values attached
        (``--job=<job>``: a value is never read as a flag)."""
        args = [sys.executable, "-m", "statectl", "standby", "follow"]
        for flag, value in (("kafka", self.kafka), ("job", self.job), ("job-id", self.job_id),
                            ("state-dir", self.state_dir), ("standby-root", self.standby_root),
                            ("zookeeper", self.zookeeper), ("container", self.container),
                            ("task", self.task),
                            ("store", self.store), ("changelog", self.changelog), ("partition", self.partition),
                            ("replica", self.replica or None), ("replica-dir", self.replica_dir),
                            ("layout", None if self.layout == LAYOUTS[0] else self.layout),
                            ("blobstore", self.blobstore), ("s3-endpoint", self.s3_endpoint),
                            ("metrics-port", self.metrics_port), ("metrics-addr", self.metrics_addr)):
            if value is not None:
                args.append(f"--{flag}={value}")
        args += ["--to-checkpoint"] * self.to_checkpoint + ["--pre-restore"] * self.pre_restore
        return args

    def variables(self) -> dict[str, str]:
        """The STATECTL_* variables this follower needs besides its flags (none of them a secret)."""
        out = {f"STATECTL_{name.upper()}": value for name, value in sorted(self.settings.items())}
        if self.config_file is not None:
            out["STATECTL_CONFIG"] = self.config_file
        if self.profile is not None:
            out["STATECTL_PROFILE"] = self.profile
        return out

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """The restarted follower's environment: ``base`` (the promote's) without its STATECTL_* variables but
        the secret ones, plus :meth:`variables`."""
        keep = {k: v for k, v in base.items() if not k.startswith("STATECTL_") or k in SECRET_ENV}
        return {**keep, **self.variables()}

    def command(self, *, replica_dir: bool = True) -> str:
        """The shell command an operator runs to start this follower (``replica_dir`` False: without its
        --replica-dir)."""
        args = ["statectl", *self.argv()[3:]]
        if not replica_dir:
            args = [a for a in args if not a.startswith("--replica-dir=")]
        return " ".join([*(f"{k}={shlex.quote(v)}" for k, v in self.variables().items()), shlex.join(args)])


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value) and value.isprintable()


def restart(settings: FollowerSettings, *, cwd: Path, log: Path, following: Callable[[int], bool],
            wait_s: float = RESTART_WAIT_S) -> str:
    """Start the follower ``settings`` describe, detached (its own session; stderr to ``log``, replaced), in
    ``cwd``; wait until ``following(pid)`` (it holds its replica's lock), it exits, or ``wait_s`` passed;
    return the sentence that says which (with the command to run when it did not come back)."""
    try:
        with open(log, "wb") as err:
            proc = subprocess.Popen(settings.argv(), cwd=cwd, env=settings.environment(os.environ),
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                    start_new_session=True)
    except OSError as e:
        return f"its follower could not be started again ({e}): start it with: {settings.command()}"
    deadline = time.monotonic() + wait_s
    while not following(proc.pid):
        code = proc.poll()
        if code is not None:
            return (f"its follower was started again but did not come back (exit {code}: {_last_error(log)}): "
                    f"start it with: {settings.command()}")
        if time.monotonic() > deadline:
            return (f"its follower was started again (pid {proc.pid}) but does not follow the replica after "
                    f"{wait_s:g}s: see 'statectl standby status' and {log}")
        time.sleep(0.05)
    return f"its follower was started again (pid {proc.pid})"


def _last_error(log: Path) -> str:
    """The restarted follower's ``Error:`` line (else its last line) from ``log``."""
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no output"
    errors = [line for line in lines if line.startswith("Error:")]
    return (errors or lines or ["no output"])[-1]
