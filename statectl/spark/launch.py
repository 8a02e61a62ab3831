"""The launch of a Spark build's job: the spark-submit command line (:func:`spark_command`, no secrets in
it), spark-submit run in its own process group and killed with it when interrupted or late, the job's
status lines read from its log as it runs (:func:`submit_job`), a rescale's job started before its job file
is written (:class:`Started`), the driver JVM's class-data-sharing archive (:class:`ClassArchive`), and the
job's own one-line error read back from its log (:func:`job_error`, after ERROR_MARK)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from statectl.errors import StatectlError
from statectl.fsutil import process_alive, write_atomic
from statectl.spark.jvm import direct_command
from statectl.spark.status import STATUS_EVERY_S, StatusReader

ERROR_MARK = "STATECTL-BUILD-ERROR: "  # the job's one-line error, on its stderr
KILL_GRACE_S = 10.0


def _job_script() -> Path:
    return Path(__file__).with_name("job.py")


# The driver JVM of a local build (its executors run in it): C2, the optimizing JIT, compiles a method once it
# ran 40 000 times (5 000 by default; loops: 300 000 iterations, not 40 000). A build's JVM lives seconds to a
# few minutes, and at the default thresholds C2 spends a third of the JVM's CPU on Spark's start-up and
# planning code, which has mostly run its last by then (4 M rows on 2 cores: 8-9 of 26 s; with these, 6 s of
# 23, the tasks' own CPU unchanged: the code per row runs millions of times and is compiled as soon).
_LOCAL_DRIVER_JIT = ("-XX:Tier4InvocationThreshold=40000 -XX:Tier4MinInvocationThreshold=5000 "
                     "-XX:Tier4CompileThreshold=50000 -XX:Tier4BackEdgeThreshold=300000")


def spark_command(submit: Path, job_file: Path, master: str, conf: dict[str, str],
                  parent: int | None = None) -> list[str]:
    """The spark-submit command line of a build (no secrets in it). A local master's driver JVM gets
    _LOCAL_DRIVER_JIT before the options ``conf`` gives it (the JVM takes the last of an option). ``parent``: a
    rescale's driver started before its job file is written waits for it while process ``parent`` (statectl)
    lives (statectl.spark.job, WHEN_WRITTEN)."""
    cmd = [str(submit), "--master", master, "--name", _APP_NAME]
    for k, v in _settings(master, conf).items():
        cmd += ["--conf", f"{k}={v}"]
    return cmd + _app_args(job_file, parent)


def launch_command(submit: Path, job_file: Path, master: str, conf: dict[str, str], env: dict[str, str],
                   cwd: Path, parent: int | None = None) -> tuple[list[str], dict[str, str]]:
    """The command and environment a build run in ``cwd`` starts with: for a local master its driver JVM's own,
    as spark-submit would exec it (statectl.spark.jvm: no bash scripts, no launcher JVM before it), else (or
    where that is not certain) spark_command's, with ``env``."""
    direct = direct_command(submit, master, _APP_NAME, _settings(master, conf), _app_args(job_file, parent), env,
                            cwd)
    return direct or (spark_command(submit, job_file, master, conf, parent), env)


_APP_NAME = "statectl adstore build"


def _settings(master: str, conf: dict[str, str]) -> dict[str, str]:
    """The --conf settings of a build: statectl's defaults, ``conf``, and a local driver's JIT thresholds."""
    settings = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4",
                "spark.sql.session.timeZone": "UTC", "spark.pyspark.python": sys.executable,
                "spark.pyspark.driver.python": sys.executable, "spark.driver.memory": "1g",
                "spark.speculation": "false", **conf}
    if master.startswith("local"):
        settings[_JAVA_OPTS] = f"{_LOCAL_DRIVER_JIT} {settings.get(_JAVA_OPTS, '')}".strip()
    return settings


def _app_args(job_file: Path, parent: int | None) -> list[str]:
    return [str(_job_script()), str(job_file), *([WHEN_WRITTEN, str(parent)] if parent is not None else [])]


WHEN_WRITTEN = "--when-written-by"  # job.py's flag: the job file is written later, by the process named


class ClassArchive:
    """The driver JVM's class-data-sharing archive (JDK CDS), kept per Java and pyspark install in
    ``$XDG_CACHE_HOME/statectl/spark/`` (~/.cache): the classes a build loads (Spark SQL, Parquet, Arrow,
    Netty...) mapped from one file instead of read, verified and linked from the jars each start. A
    build's JVM then starts and plans its first job about 4 s sooner (2 cores; 19.5 -> 15.5 s for 2 M
    rows). The first build on a machine records it (``-XX:ArchiveClassesAtExit``; the JVM's exit takes
    longer, once: about 20 s on 2 cores); later builds map it (``-XX:SharedArchiveFile``), and a build that
    starts while another records it uses none (a second recording would cost as much again). It takes about
    180 MB; a recording left by a statectl killed outright is removed by the next build that records.

    The JVM maps the archive without checking its length and dies of SIGBUS on a cut one, so it is kept
    only when whole: recorded under a name of its own, renamed into place, and its size written beside it
    (``.size``) after the build succeeded; an archive without that size, or of another size, is not used
    (and is recorded again). A JVM that still dies of a fatal error on it loses it: the build is run once
    more without (:func:`submit_job`). A mismatched archive (another JDK build, changed jars) the JVM itself
    ignores with a warning in the log. The user's own ``-Xshare``/``-XX:SharedArchiveFile``/
    ``-XX:ArchiveClassesAtExit`` in ``spark.driver.extraJavaOptions`` turn it off (``-Xshare:off``: never
    use or record one); so does a cache dir that cannot be written."""

    def __init__(self, submit: Path, conf: dict[str, str]):
        self.path: Path | None = None
        self.recording: Path | None = None
        if re.search(r"-Xshare|SharedArchiveFile|ArchiveClassesAtExit", conf.get(_JAVA_OPTS, "")):
            return
        from statectl.spark.probe import java_binary

        java = java_binary()[0]
        try:
            real = os.path.realpath(java) if java else ""
            jars = submit.parent.parent / "jars"
            ident = [real, str(os.stat(real).st_mtime_ns) if real else "", str(jars),
                     str(jars.stat().st_mtime_ns), *sorted(os.listdir(jars))]
            base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "statectl" / "spark"
            name = "classes-" + hashlib.sha256("\0".join(ident).encode()).hexdigest()[:16]
            path = base / f"{name}.jsa"
            if _read_size(path.with_suffix(".size")) == _file_size(path) is not None:
                self.path = path
                return
            base.mkdir(parents=True, exist_ok=True)
            if _remove_orphans(base, name):  # another build records it now: a second recording costs as much
                self.path = None
                return
            self.recording = base / f".{name}.{os.getpid()}.{time.monotonic_ns()}.jsa"
            self.recording.touch()  # claimed now: the JVM writes it only as it exits
            self.path = path
        except OSError:
            self.path = self.recording = None

    def conf(self, conf: dict[str, str]) -> dict[str, str]:
        """``conf`` with the JVM option that maps (or records) the archive, before the user's own."""
        if self.path is None:
            return conf
        flag = f"-XX:ArchiveClassesAtExit={self.recording}" if self.recording else f"-XX:SharedArchiveFile={self.path}"
        return {**conf, _JAVA_OPTS: f"{flag} {conf.get(_JAVA_OPTS, '')}".strip()}

    def keep(self) -> None:
        """After a build that succeeded: put a recorded archive in place (its size beside it)."""
        if self.recording is None or self.path is None:
            return
        try:
            size = _file_size(self.recording)
            if size:
                os.replace(self.recording, self.path)
                write_atomic(self.path.with_suffix(".size"), f"{size}\n", unique=True)
        except OSError:
            pass
        self.discard()

    def discard(self) -> None:
        """Remove what this build was recording (a failed or killed build's may be cut)."""
        if self.recording is not None:
            self.recording.unlink(missing_ok=True)

    def drop(self) -> None:
        """Forget the archive in use (the JVM died on it): the next build records a new one."""
        if self.path is not None and self.recording is None:
            self.path.with_suffix(".size").unlink(missing_ok=True)
            self.path.unlink(missing_ok=True)


_JAVA_OPTS = "spark.driver.extraJavaOptions"
# A driver JVM that only schedules tasks and passes their records (a rescale's: the work is in the Python
# workers) spends most of its CPU compiling with C2 and collecting with parallel GC threads: C1 only and the
# serial collector (a trivial job on local[2], 2 loaded cores: 6.0 -> 3.8 s of CPU, about 3 s sooner).
LIGHT_DRIVER = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def light_driver(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with LIGHT_DRIVER in the driver's JVM options, before the user's own (the JVM takes a flag's
    last setting)."""
    return {**conf, _JAVA_OPTS: f"{LIGHT_DRIVER} {conf.get(_JAVA_OPTS, '')}".strip()}


def worker_conf(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with the job's Python workers forked by statectl.spark.daemon (pyspark's daemon, importing the
    installed pyspark) unless the user names a daemon module of their own."""
    return {"spark.python.daemon.module": "statectl.spark.daemon", **conf}


def rescale_conf(conf: dict[str, str]) -> dict[str, str]:
    """A rescale's ``conf``: worker_conf's, with light_driver's JVM."""
    return worker_conf(light_driver(conf))


_JVM_FATAL = "A fatal error has been detected by the Java Runtime Environment"


def _remove_orphans(base: Path, name: str) -> bool:
    """Remove the recordings (``.<name>.<pid>.<ns>.jsa``) of statectl processes that are gone (killed
    outright while their build recorded, or a day ago: its pid may be another process's by now); whether a
    live process records one now."""
    live = False
    for f in base.glob(f".{name}.*.jsa"):
        pid = f.name.split(".")[2]
        if pid.isdigit() and process_alive(int(pid)) and time.time() - (_mtime(f) or 0) < _CLAIM_S:
            live = True
        else:
            f.unlink(missing_ok=True)
    return live


_CLAIM_S = 24 * 3600


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _file_size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _read_size(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def submit_job(submit: Path, job_file: Path, log_path: Path, master: str, conf: dict[str, str],
               timeout_s: float | None, secrets: dict[str, str],
               on_status: Callable[[dict[str, int]], None] | None = None, started: "Started | None" = None) -> None:
    """Run spark-submit (:func:`_start`, :func:`_finish`) with the driver's :class:`ClassArchive`, in ``log_path``'s dir
    (out_dir), its output into ``log_path``; a JVM that dies of a fatal error (SIGBUS, SIGSEGV) while mapping
    one is run once more without it. ``on_status`` gets the job's status figures as it writes them
    (statectl.spark.status). ``started``: the job already started (:class:`Started`), waited for here.
    StatectlError (with the job's own error) when the job fails."""
    archive = started.archive if started is not None else ClassArchive(submit, conf)
    try:
        # a JVM that records the archive writes it as it exits: that build is waited for to the end
        proc = started.take() if started is not None else None
        with _sigterm_as_interrupt():
            proc = proc or _start(submit, job_file, log_path, master, archive.conf(conf), secrets)
            _finish(proc, log_path, timeout_s, on_status, early=archive.recording is None)
    except StatectlError:
        archive.discard()
        if archive.path is None or archive.recording is not None \
                or _JVM_FATAL not in log_path.read_text(errors="replace"):
            raise
        archive.drop()
        with _sigterm_as_interrupt():
            _finish(_start(submit, job_file, log_path, master, conf, secrets), log_path, timeout_s, on_status,
                    early=True)
        return
    except BaseException:
        archive.discard()
        raise
    archive.keep()


class Started:
    """A rescale's spark-submit started before its job file is written (:meth:`start`): the JVM and the driver's
    SparkContext start while statectl plans, and the driver waits for the job file (statectl.spark.job). Handed
    to :func:`submit_job` (:meth:`take`) once the file is written; until then :meth:`cancel` (and the ``with``
    block's end) kills its process group and waits for it, which removes Spark's own temp dirs (its shutdown
    hooks). While it runs, SIGTERM interrupts the main thread (:class:`_sigterm_as_interrupt`), so that a
    statectl stopped while it plans kills the job first."""

    def __init__(self, proc: subprocess.Popen, archive: "ClassArchive", guard: "_sigterm_as_interrupt"):
        self.proc, self.archive, self._guard = proc, archive, guard

    @classmethod
    def start(cls, submit: Path, job_file: Path, log_path: Path, master: str, conf: dict[str, str],
              secrets: dict[str, str]) -> "Started | None":
        """spark-submit of the job file ``job_file`` not yet written, its driver waiting for it while this process
        lives; None when the driver's class archive is to be recorded first (a recording JVM exits slowly, and
        one killed records nothing: :func:`submit_job` records it in the job's own run)."""
        archive = ClassArchive(submit, conf)
        if archive.recording is not None:
            archive.discard()
            return None
        guard = _sigterm_as_interrupt()
        guard.__enter__()
        try:
            proc = _start(submit, job_file, log_path, master, archive.conf(conf), secrets, parent=os.getpid())
        except BaseException:
            guard.__exit__()
            raise
        return cls(proc, archive, guard)

    def __enter__(self) -> "Started":
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()

    def take(self) -> subprocess.Popen:
        """The process, now the caller's to wait for (and kill)."""
        proc, self.proc = self.proc, None
        self._guard.__exit__()
        if proc is None:
            raise StatectlError("the Spark job was already handed over or cancelled")
        return proc

    def cancel(self) -> None:
        """Kill the job unless it was taken; idempotent."""
        if self.proc is not None:
            proc, self.proc = self.proc, None
            try:
                _kill(proc)
            finally:
                self._guard.__exit__()


def _start(submit: Path, job_file: Path, log_path: Path, master: str, conf: dict[str, str],
           secrets: dict[str, str], parent: int | None = None) -> subprocess.Popen:
    """The build (launch_command's: its driver JVM, or spark-submit) in its own process group, its output into
    the log (``parent``: spark_command's); it gets SIGTERM when statectl dies any other way than by a signal it
    handles (where setpriv is installed)."""
    root = str(Path(__file__).resolve().parents[2])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STATECTL_S3_", "STATECTL_KAFKA_"))}
    env.update(secrets)
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["PYTHONPATH"] = os.pathsep.join([root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    if master.startswith("local"):
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    cmd, env = launch_command(submit, job_file, master, conf, env, log_path.parent, parent)
    setpriv = shutil.which("setpriv")
    # A statectl killed outright (SIGKILL, OOM) cannot kill the group: the build is told to get SIGTERM when its
    # parent dies (Linux's parent-death signal, through util-linux's setpriv, which execs it: same pid).
    launch = [setpriv, "--pdeathsig", "TERM", "--", *cmd] if setpriv else cmd
    with open(log_path, "wb") as log:
        log.write(("$ " + " ".join(cmd) + "\n").encode())
        log.flush()
        return subprocess.Popen(launch, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                cwd=log_path.parent, start_new_session=True)


def _finish(proc: subprocess.Popen, log_path: Path, timeout_s: float | None,
            on_status: Callable[[dict[str, int]], None] | None, early: bool = False) -> None:
    """Wait for spark-submit; kill its group when interrupted (Ctrl-C, SIGTERM) or past ``timeout_s``.
    ``early``: return once the job says its manifest is written (DONE_MARK), its SparkContext's stop and the
    JVM's exit left to finish beside the caller's next steps."""
    try:
        code = _wait(proc, timeout_s, StatusReader(log_path, on_status), early)
    except subprocess.TimeoutExpired:
        _kill(proc)
        raise StatectlError(f"the Spark build did not finish within {timeout_s:g}s; it was stopped",
                            hint=f"see {log_path}") from None
    except BaseException:
        _kill(proc)
        raise
    if code != 0:
        raise StatectlError(f"the Spark build failed: {job_error(log_path) or f'spark-submit exited with {code}'}",
                            hint=f"see {log_path}")


def _wait(proc: subprocess.Popen, timeout_s: float | None, status: StatusReader, early: bool = False) -> int:
    """spark-submit's exit code, reading the job's status lines as it runs; TimeoutExpired past ``timeout_s``.
    ``early``: 0 as soon as the job says it is done (its process reaped in the background)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    polled, every = 0.0, _DONE_POLL_S if early else _POLL_S
    while True:
        wait = every if deadline is None else min(every, max(0.0, deadline - time.monotonic()))
        try:
            code = proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            if deadline is not None and time.monotonic() >= deadline:
                raise
            if early or time.monotonic() - polled >= STATUS_EVERY_S:
                status.poll()
                polled = time.monotonic()
            if early and status.done:
                _lowest_priority(proc.pid)
                threading.Thread(target=_reap, args=(proc,), name="statectl-spark-exit", daemon=True).start()
                return 0
            continue
        status.poll()  # the last figures, written as the job ended
        return code


_POLL_S = 0.1
_DONE_POLL_S = 0.02  # how soon the job's end is seen (a read of the log's new bytes)


def _lowest_priority(pgid: int) -> None:
    """Process group ``pgid`` (a job that said it is done: its SparkContext's stop, the JVM's exit, Spark's
    removal of its temp dirs, the Python workers' exit) at the lowest CPU priority, every thread of it: on a few
    cores it takes what the caller's next steps (ingest, upload, commit) leave instead of half of it."""
    try:
        os.setpriority(os.PRIO_PGRP, pgid, 19)
    except OSError:
        pass  # gone already


def _reap(proc: subprocess.Popen) -> None:
    """Wait for a build that said it is done to exit (its SparkContext's stop, the JVM's exit); kill its group
    when it has not within KILL_GRACE_S * 6."""
    try:
        proc.wait(timeout=KILL_GRACE_S * 6)
    except subprocess.TimeoutExpired:
        _kill(proc)


def _kill(proc: subprocess.Popen) -> None:
    """SIGTERM to spark-submit's process group (the JVM and its Python workers), SIGKILL after a grace."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, KILL_GRACE_S)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=wait)
            _wait_group_gone(proc.pid, KILL_GRACE_S)  # the group (Python workers) may outlive its leader
            return
        except subprocess.TimeoutExpired:
            continue


def _wait_group_gone(pgid: int, wait_s: float) -> None:
    """SIGKILL what is left of process group ``pgid`` until none of it runs, for at most ``wait_s``: a member
    whose parent died before it is a zombie until init reaps it, which some inits do only every few seconds."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            return
        if not _group_runs(pgid):
            return
        time.sleep(0.05)


def _group_runs(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is not a zombie (True when /proc cannot tell)."""
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return True
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


class _sigterm_as_interrupt:
    """While a build runs in the main thread of a program that left SIGTERM at its default (which would
    end it at once, leaving Spark running), SIGTERM raises KeyboardInterrupt so the job is killed first."""

    def __enter__(self) -> None:
        self._old = None
        if threading.current_thread() is threading.main_thread() \
                and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            self._old = signal.signal(signal.SIGTERM, _raise_interrupt)

    def __exit__(self, *exc: object) -> None:
        if self._old is not None:
            signal.signal(signal.SIGTERM, self._old)


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


_PY_ERROR = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception): \S")


def job_error(log_path: Path) -> str | None:
    """The job's own one-line error from its log: the line it marked, else the last line that looks like a
    Python exception; None when there is neither."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    marked = [line[line.index(ERROR_MARK) + len(ERROR_MARK):] for line in lines if ERROR_MARK in line]
    if marked:
        return marked[-1].strip()
    found = [line.strip() for line in lines if _PY_ERROR.match(line.strip())]
    return found[-1][:500] if found else None
