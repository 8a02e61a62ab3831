"""Helpers for the standby integration tests (tests/integration/test_standby.py): a changelog writer that
remembers what it wrote (so the expected store is known exactly), a background feeder of puts and
deletes, ``statectl standby follow`` as a real process, and readers of stores and offset files."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

STATECTL = str(Path(sys.executable).parent / "statectl")


def clean_env(tmp: Path) -> dict[str, str]:
    """The environment of a statectl subprocess: no STATECTL_* or AWS_*, XDG dirs in ``tmp``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STATECTL_", "AWS_"))}
    return dict(env, XDG_CONFIG_HOME=str(tmp / "xdg-config"), XDG_DATA_HOME=str(tmp / "xdg-data"))


def isolate_cli(tmp_path: Path, monkeypatch: Any) -> None:
    """The environment of an in-process statectl run (as clean_env for a subprocess): no STATECTL_* variable,
    XDG data and config dirs and the working dir under ``tmp_path``."""
    for name in list(os.environ):
        if name.startswith("STATECTL_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.chdir(tmp_path)


def cli(tmp: Path, *args: str, code: int | None = 0, timeout: float = 180,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``statectl ARGS`` (a whole process, clean env plus ``env``, cwd ``tmp``); check its exit code unless
    None."""
    p = subprocess.run([STATECTL, *args], check=False, capture_output=True, text=True, timeout=timeout,
                       env={**clean_env(tmp), **(env or {})}, cwd=tmp, stdin=subprocess.DEVNULL)
    if code is not None:
        assert p.returncode == code, (args, p.returncode, p.stdout, p.stderr)
    return p


def cli_here(tmp: Path, *args: str, code: int | None = 0, env: dict[str, str] | None = None,
             **_: Any) -> subprocess.CompletedProcess:
    """``cli`` run in this process (typer's CliRunner), for the commands that set up or read back what a test
    checks (a backup of its sources, a restore or listing of its results): the same clean environment (as
    clean_env, plus ``env``) and working dir ``tmp``, the same CompletedProcess, without a Python start and
    its imports, botocore's among them (0.3-0.5 s of CPU a run). The commands under test, and any a test
    signals, kills, runs beside another or gives STATECTL_FAILPOINTS (read once per process), stay cli()."""
    from typer.testing import CliRunner

    from statectl.cli.main import app

    assert threading.current_thread() is threading.main_thread(), "cli_here swaps the process's env and cwd"
    assert "STATECTL_FAILPOINTS" not in (env or {}), "failpoints are read once per process: use cli()"
    clean = clean_env(tmp)
    environ = {**{k: None for k in os.environ if k not in clean}, **clean, **(env or {})}
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        r = CliRunner().invoke(app, list(args), env=environ)
    finally:
        os.chdir(cwd)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    p = subprocess.CompletedProcess(list(args), r.exit_code, r.stdout, r.stderr)
    if code is not None:
        assert p.returncode == code, (args, p.returncode, p.stdout, p.stderr)
    return p


def json_objects(text: str) -> list[Any]:
    """Every JSON value in ``text``, in order (JSON lines, then an indented object, as follow -o json prints)."""
    dec = json.JSONDecoder()
    out, i = [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        obj, i = dec.raw_decode(text, i)
        out.append(obj)


# -- the changelog -------------------------------------------------------------------------------------


Record = tuple[int, bytes, "bytes | None"]  # (offset, key, value: None is a delete)


class ChangelogWriter:
    """Writes records to one partition of a changelog and remembers each one with its offset."""

    def __init__(self, bootstrap: str, topic: str, partition: int = 0, *, linger_ms: int = 0,
                 batch_size: int = 1 << 20):
        from kafka import KafkaProducer

        self.topic, self.partition = topic, partition
        self.log: list[Record] = []
        self._lock = threading.Lock()
        self._producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=linger_ms,
                                       batch_size=batch_size, max_request_size=4 * batch_size)

    def send(self, records: list[tuple[bytes, bytes | None]]) -> list[int]:
        """Write ``records`` in order, wait for every acknowledgement; return their offsets."""
        futures = [self._producer.send(self.topic, key=k, value=v, partition=self.partition) for k, v in records]
        self._producer.flush()
        offsets = [f.get(timeout=60).offset for f in futures]
        with self._lock:
            self.log += [(o, k, v) for o, (k, v) in zip(offsets, records)]
        return offsets

    def records(self) -> list[Record]:
        with self._lock:
            return sorted(self.log)

    @property
    def last_offset(self) -> int:
        with self._lock:
            return max(o for o, _, _ in self.log)

    def state(self, upto: int | None = None) -> dict[bytes, bytes]:
        """The store the records up to offset ``upto`` (all: None) make."""
        return apply_records([r for r in self.records() if upto is None or r[0] <= upto])

    def close(self) -> None:
        self._producer.close(timeout=10)


def apply_records(records: list[Record]) -> dict[bytes, bytes]:
    state: dict[bytes, bytes] = {}
    for _, k, v in sorted(records, key=lambda r: r[0]):
        if v is None:
            state.pop(k, None)
        else:
            state[k] = v
    return state


def random_records(rng: random.Random, n: int, keys: int = 300) -> list[tuple[bytes, bytes | None]]:
    """Puts (some empty, some binary), overwrites and deletes (some of keys never written)."""
    out: list[tuple[bytes, bytes | None]] = []
    for _ in range(n):
        k = b"key-%05d" % rng.randrange(keys)
        r = rng.random()
        if r < 0.25:
            out.append((k, None))
        elif r < 0.3:
            out.append((k, b""))
        elif r < 0.35:
            out.append((b"\x00\xff" + k, rng.randbytes(rng.randrange(1, 40))))
        else:
            out.append((k, rng.randbytes(rng.randrange(1, 64))))
    return out


class Feeder:
    """Writes batches of random puts and deletes on a thread until stopped (or ``limit`` records)."""

    def __init__(self, writer: ChangelogWriter, *, seed: int, batch: int = 20, pause_s: float = 0.05,
                 limit: int | None = None):
        self.writer, self.batch, self.pause_s, self.limit = writer, batch, pause_s, limit
        self.rng = random.Random(seed)
        self.sent = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            while not self._stop.is_set() and (self.limit is None or self.sent < self.limit):
                n = self.batch if self.limit is None else min(self.batch, self.limit - self.sent)
                self.writer.send(random_records(self.rng, n))
                self.sent += n
                self._stop.wait(self.pause_s)
        except BaseException as e:  # noqa: BLE001 - reported by stop()
            self.error = e

    def start(self) -> Feeder:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), "the feeder did not stop"
        assert self.error is None, f"the feeder failed: {self.error!r}"


# -- stores and offset files -----------------------------------------------------------------------


def read_store(path: Path) -> dict[bytes, bytes]:
    """Every key and value of the store at ``path``, opened read-only in raw mode.

    The store may be live (a running follower's replica): a read-only open lists the table files its MANIFEST
    names, then opens them, and a compaction of the writer can delete one in between ("No such file or
    directory" for an ``.sst``). Such a read is made again, a fresh open each time, for at most 10 s: a
    stopped store that really lacks a file fails every time, and its last error is raised."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return _read_store_once(path)
        except Exception as e:
            if ".sst" not in str(e) or "No such file" not in str(e) or time.monotonic() > deadline:
                raise
        time.sleep(0.05)


def _read_store_once(path: Path) -> dict[bytes, bytes]:
    import rocksdict

    db = rocksdict.Rdict(str(path), rocksdict.Options(raw_mode=True), access_type=rocksdict.AccessType.read_only())
    try:
        return dict(db.items())
    finally:
        db.close()


def offsets_of(store: Path, name: str = "OFFSET-v2") -> dict[str, str | None] | None:
    """The offset file ``name`` of a store as a dict ``system.stream.partition`` -> offset (None: no file)."""
    from statectl.formats.offsets import read_offsets

    try:
        return {ssp.key(): o for ssp, o in read_offsets(store / name).items()}
    except FileNotFoundError:
        return None


def replica_offset(store: Path, topic: str, partition: int = 0) -> int | None:
    """The offset the replica's OFFSET-v2 names for ``topic``/``partition`` (None: no file, or null)."""
    offsets = offsets_of(store)
    if not offsets:
        return None
    value = offsets[f"kafka.{topic}.{partition}"]
    return None if value is None else int(value)


def process_state(pid: int) -> str:
    """The state letter of process ``pid`` from /proc (``T``: stopped, ``Z``: a zombie). Raises OSError once
    it is reaped."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def wait_until(what: Callable[[], Any], timeout: float = 90.0, why: str = "", interval: float = 0.05) -> Any:
    """``what()`` once it is true, asked every ``interval`` seconds, or less often when asking costs: a check
    that reads a topic or runs statectl is made at most a third of the time (the suite is CPU-bound: a
    check asked back to back takes the CPU of what it waits for)."""
    deadline = time.monotonic() + timeout
    while True:
        began = time.monotonic()
        got = what()
        if got:
            return got
        now = time.monotonic()
        assert now < deadline, f"timed out waiting: {why}"
        time.sleep(max(interval, 2 * (now - began)))


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


# -- the follower process ----------------------------------------------------------------------------


class Follower:
    """``statectl standby follow ARGS -o json`` as a process; stdout and stderr go to files in ``tmp``."""

    count = 0

    def __init__(self, tmp: Path, args: list[str], *, json_output: bool = True, module: bool = False,
                 env: dict[str, str] | None = None):
        Follower.count += 1
        name = f"follower-{Follower.count}"
        self.out_path, self.err_path = tmp / f"{name}.out", tmp / f"{name}.err"
        # Open for the process's life, closed by wait()/kill().
        self._out, self._err = open(self.out_path, "wb"), open(self.err_path, "wb")  # noqa: SIM115
        program = [sys.executable, "-m", "statectl"] if module else [STATECTL]  # module: ``python -m statectl``
        argv = [*program, "standby", "follow", *args] + (["-o", "json"] if json_output else [])
        self.proc = subprocess.Popen(argv, env={**clean_env(tmp), **(env or {})}, cwd=tmp, stdin=subprocess.DEVNULL, stdout=self._out,
                                     stderr=self._err)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stdout(self) -> str:
        return self.out_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def objects(self) -> list[Any]:
        return json_objects(self.stdout())

    def status_lines(self) -> list[dict]:
        """The JSON lines of its lag (one line each, while it runs)."""
        return [obj for obj in self.objects() if isinstance(obj, dict) and "pid" in obj]

    def result(self) -> dict:
        """Its final result (the last JSON value it printed, the FollowResult)."""
        objs = [obj for obj in self.objects() if isinstance(obj, dict) and "reseeds" in obj]
        assert objs, (self.stdout(), self.stderr())
        return objs[-1]

    def describe(self) -> str:
        return f"pid {self.pid} rc {self.proc.poll()}\nstdout: {self.stdout()[-2000:]}\nstderr: {self.stderr()[-3000:]}"

    def assert_running(self) -> None:
        assert self.proc.poll() is None, self.describe()

    def wait(self, timeout: float = 60) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self._close()

    def terminate(self, timeout: float = 60) -> int:
        """SIGTERM, then its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self._close()

    def _close(self) -> None:
        for f in (self._out, self._err):
            if not f.closed:
                f.close()


def write_checkpoint_record(bootstrap: str, job: str, task: str, checkpoint: Any, *,
                            timestamp_ms: int | None = None) -> None:
    """One record of ``task``'s ``checkpoint`` (a formats.checkpoint CheckpointV1 or CheckpointV2) on the job's
    checkpoint topic (made if missing), as Samza's KafkaCheckpointManager writes it; ``timestamp_ms``: its
    record timestamp (default: now)."""
    from statectl.catalog.kafka_log import CHECKPOINT_TOPIC_CONFIGS, KafkaCheckpointLog
    from statectl.formats.checkpoint import (
        KEY_TYPE_V1,
        KEY_TYPE_V2,
        CheckpointKey,
        CheckpointV1,
        encode_key,
        encode_v1,
        encode_v2,
    )
    from statectl.kafka.client import create_topic, open_producer

    with KafkaCheckpointLog(bootstrap, job, "1") as log:
        topic = log.topic
    create_topic(bootstrap, topic, partitions=1, configs=CHECKPOINT_TOPIC_CONFIGS)
    v1 = isinstance(checkpoint, CheckpointV1)
    key = encode_key(CheckpointKey(task, KEY_TYPE_V1 if v1 else KEY_TYPE_V2))
    producer = open_producer(bootstrap)
    try:
        producer.send(topic, key=key, value=encode_v1(checkpoint) if v1 else encode_v2(checkpoint), partition=0,
                      timestamp_ms=timestamp_ms).get(timeout=30)
        producer.flush(timeout=30)
    finally:
        producer.close()
