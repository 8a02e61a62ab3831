"""Several stores' operations at once (backup --all, restore --all): at most a few stores in flight, each
with its share of --parallelism, so that many small stores do not wait on one another (a small store's time
is mostly requests one after the other: its lease, pin, catalog and commit) and one large store does not
take more than its share. Each store's operation is whole on its own: a StatectlError it raises is its
result, and does not stop the others."""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor
from typing import Any, Callable, Sequence, TypeVar

from statectl.errors import StatectlError
from statectl.parallel import Cancelled, wait_for
from statectl.progress import ProgressReporter

# How many stores run at once (each with its share of --parallelism).
STORES_AT_ONCE = 4

T = TypeVar("T")


def shares(stores: int, parallelism: int, stores_at_once: int = STORES_AT_ONCE) -> tuple[int, int]:
    """(stores in flight, transfers each) for ``stores`` stores sharing ``parallelism`` transfers."""
    at_once = max(1, min(stores, stores_at_once, parallelism))
    return at_once, max(1, parallelism // at_once)


def run_at_once(items: Sequence[T], one: Callable[[T], Any], at_once: int, shared: "SharedProgress") -> list[Any]:
    """``one(item)`` of every item, ``at_once`` at a time: each one's result, or the StatectlError it raised,
    in ``items``' order. Anything else (a bug, Ctrl-C in this thread) stops the others (``shared`` makes their
    transfers raise Cancelled; the ones not started never start) and is raised once the running ones have
    stopped."""
    def guarded(item: T) -> Any:
        try:
            return one(item)
        except StatectlError as e:
            return e

    pool = ThreadPoolExecutor(max_workers=at_once, thread_name_prefix="statectl-store")
    futures: list[Future[Any]] = [pool.submit(guarded, item) for item in items]
    try:
        wait_for(futures, FIRST_EXCEPTION)
        failed = [f for f in futures if f.done() and f.exception() is not None]
        if failed:
            raise failed[0].exception()  # type: ignore[misc]
        return [f.result() for f in futures]
    except BaseException:
        shared.cancel.set()
        for f in futures:
            f.cancel()
        raise
    finally:
        pool.shutdown(wait=True)


class SharedProgress(ProgressReporter):
    """The reporter the stores running at once share: their bytes advance the caller's one bar (the caller
    starts and stops it; each store's own phases are left out), their notes pass through; once ``cancel`` is
    set every transfer's next bytes raise Cancelled, which fails its store's operation (its store as it
    was)."""

    def __init__(self, inner: ProgressReporter):
        self.inner = inner
        self.cancel = threading.Event()
        self.notes: list[str] = []

    def advance(self, nbytes: int) -> None:
        if self.cancel.is_set():
            raise Cancelled()
        self.inner.advance(nbytes)

    def note(self, message: str) -> None:
        self.inner.note(message)
