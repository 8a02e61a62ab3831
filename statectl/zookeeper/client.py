"""A read-only ZooKeeper client (kazoo) whose every wait is bounded, and the connect string it takes:
``host:port[,host:port...][/chroot]``, as Samza's ``zk.connect`` and ZooKeeper's ConnectStringParser read it
(a host without a port is on 2181; the chroot is the path every other path is under)."""

from __future__ import annotations

import logging
import re
from typing import Any

from statectl.errors import MissingDependencyError, StatectlError

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_PORT = 2181  # ZooKeeper's ConnectStringParser.DEFAULT_PORT
_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::(\d{1,5}))?")
_CHROOT = re.compile(r"(/[^/\x00-\x1f\x7f]+)+")
CONNECT_HINT = "pass --zookeeper host:port[,host:port][/chroot], the job's zk.connect"
# kazoo logs every refused connection attempt: kept out of the operator's terminal, the error says it.
_LOG = logging.getLogger("statectl.zookeeper.kazoo")
_LOG.propagate = False
_LOG.addHandler(logging.NullHandler())


def check_connect(value: str) -> str:
    """``value`` as a connect string, stripped; ValueError saying what is wrong with it (config.KEYS parses
    --zookeeper with it: a bad one is a usage error before anything connects)."""
    value = value.strip()
    hosts, slash, chroot = value.partition("/")
    if not hosts:
        raise ValueError("expected host:port[,host:port][/chroot]")
    for host in hosts.split(","):
        m = _HOST.fullmatch(host)
        if m is None:
            raise ValueError(f"{host!r} is not host:port")
        if m.group(2) is not None and not 0 < int(m.group(2)) < 65536:
            raise ValueError(f"port {m.group(2)} of {host!r} is not between 1 and 65535")
    if slash and chroot and not _CHROOT.fullmatch("/" + chroot):
        raise ValueError(f"chroot /{chroot} is not a ZooKeeper path (no empty or trailing '/' parts)")
    return value


def _kazoo() -> Any:
    try:
        import kazoo.client
        import kazoo.exceptions
        import kazoo.retry
    except ImportError as e:
        raise MissingDependencyError("kazoo is not installed; it is needed for --zookeeper",
                                     hint="pip install kazoo") from e
    return kazoo


class ZooKeeper:
    """A read-only session with the ZooKeeper ensemble ``connect`` (check_connect's form): connecting and each
    read wait at most ``timeout_s``. ``get`` and ``children`` answer None for a znode that does not exist.
    Unreachable, or a read refused (ACLs) or cut off: StatectlError (exit 1) naming ``connect``. Use as a
    context manager."""

    def __init__(self, connect: str, *, timeout_s: float = DEFAULT_TIMEOUT_S):
        self.connect, self.timeout_s = check_connect(connect), timeout_s
        self._client: Any = None

    def __enter__(self) -> ZooKeeper:
        kazoo = _kazoo()
        # The session timeout is at least the server's floor (2 ticks, 4 s by default); the wait is ours.
        client = kazoo.client.KazooClient(hosts=self.connect, timeout=max(self.timeout_s, 4.0), read_only=True,
                                          connection_retry=kazoo.retry.KazooRetry(max_tries=-1, max_delay=1.0),
                                          logger=_LOG)
        try:
            client.start(timeout=self.timeout_s)
        except client.handler.timeout_exception:
            client.close()
            raise StatectlError(f"ZooKeeper {self.connect} did not answer within {self.timeout_s:g} s",
                                hint="check --zookeeper and that the job's ZooKeeper runs; " + CONNECT_HINT) from None
        self._client = client
        return self

    def __exit__(self, *exc: object) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.stop()
            client.close()

    def get(self, path: str) -> bytes | None:
        """The data of znode ``path`` (b"" for none), or None when it does not exist."""
        got = self._call(path, lambda c: c.get_async(path))
        return None if got is None else (got[0] or b"")

    def children(self, path: str) -> list[str] | None:
        """The names of znode ``path``'s children, or None when it does not exist."""
        return self._call(path, lambda c: c.get_children_async(path))

    def _call(self, path: str, start: Any) -> Any:
        exc = _kazoo().exceptions
        client = self._client
        if client is None:
            raise RuntimeError("ZooKeeper used outside its with block")
        try:
            return start(client).get(timeout=self.timeout_s)
        except exc.NoNodeError:
            return None
        except client.handler.timeout_exception:
            raise StatectlError(f"ZooKeeper {self.connect} did not answer a read of {path} within "
                                f"{self.timeout_s:g} s", hint="check that the job's ZooKeeper runs") from None
        except exc.KazooException as e:
            raise StatectlError(f"ZooKeeper {self.connect}: reading {path} failed: {type(e).__name__} {e}".rstrip(),
                                hint="a NoAuthError means the znode's ACL does not let statectl read it") from None
