"""Reading ahead: an iterator of record batches (PartitionReader.batches) run on a thread of its own, a few
batches ahead of its caller, so that fetching and decoding the next records overlaps applying the last ones.

kafka-python decodes records in the thread that polls, and RocksDB releases the GIL while it flushes and
syncs: a follower that polls and applies in one thread waits for each in turn. The iterator is made, run
and closed on the reading thread: its consumer is used by that thread alone while the read lasts.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")

DEPTH = 4  # batches read ahead: enough to cover a flush of the store (each batch a poll of up to 10 000 records)
_PUT_WAIT_S = 0.1  # how often a reader blocked on a full queue checks whether it was closed
_ITEM, _END, _ERROR = range(3)


class ReadAhead(Generic[T]):
    """The items of the iterator ``make()`` returns, made on a thread of its own up to ``depth`` items ahead.

    Iterate it once: the items come in order, and an exception the iterator raised is raised in the caller
    after the items that came before it. :meth:`close` (also on leaving a ``with`` block, or when the
    iteration stops early) stops the reading thread at its next item and waits for it: the iterator is
    then closed (its ``finally`` blocks run on that thread) and nothing reads any more."""

    def __init__(self, make: Callable[[], Iterator[T]], *, depth: int = DEPTH, name: str = "read-ahead"):
        self._make = make
        self._queue: queue.Queue[tuple[int, Any]] = queue.Queue(maxsize=max(1, depth))
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _put(self, kind: int, value: Any) -> bool:
        """Queue one entry, waiting while the queue is full; False once closed."""
        while not self._closed.is_set():
            try:
                self._queue.put((kind, value), timeout=_PUT_WAIT_S)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            it = self._make()
            try:
                for item in it:
                    if not self._put(_ITEM, item):
                        return
            finally:
                close = getattr(it, "close", None)
                if close is not None:
                    close()
        except BaseException as e:  # noqa: BLE001 - raised in the caller's thread, after the items before it
            self._put(_ERROR, e)
        else:
            self._put(_END, None)

    def __iter__(self) -> Iterator[T]:
        try:
            while True:
                kind, value = self._queue.get()
                if kind == _ITEM:
                    yield value
                elif kind == _END:
                    return
                else:
                    raise value
        finally:
            self.close()

    def close(self) -> None:
        """Stop reading and wait for the reading thread to end (at most its current poll). Idempotent."""
        self._closed.set()
        while self._thread.is_alive():
            try:  # a reader blocked on the full queue sees the close at its next try
                while True:
                    self._queue.get_nowait()
            except queue.Empty:
                pass
            self._thread.join(_PUT_WAIT_S)

    def __enter__(self) -> ReadAhead[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
