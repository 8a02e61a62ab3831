"""The generic parallel runner: a bounded thread pool whose tasks share a cancel event (used by
transfers, retention and gc; nothing here knows what a task does), and the wait on futures that Ctrl-C ends."""

from __future__ import annotations

import threading
from concurrent.futures import ALL_COMPLETED, FIRST_EXCEPTION, Future, ThreadPoolExecutor
from typing import Callable, Sequence, TypeVar

from statectl.errors import UsageError

T = TypeVar("T")


class Cancelled(Exception):
    pass


# How often a thread waiting on futures looks for a signal (wait_for).
SIGNAL_CHECK_S = 0.2


def wait_for(futures: Sequence[Future], return_when: str = ALL_COMPLETED) -> None:
    """Return once every future is done (``return_when`` ALL_COMPLETED) or one raised (FIRST_EXCEPTION), as
    concurrent.futures.wait does, in a way Ctrl-C always ends:

    - the wait is on an Event of its own, in steps of SIGNAL_CHECK_S: the kernel may deliver SIGINT or
      SIGTERM to any thread, and one that lands on a worker only trips Python's handler, which the main
      thread runs when it next executes bytecode (a wait without a timeout would put the KeyboardInterrupt
      off until the tasks end: a rate-limited transfer's, minutes);
    - the futures' own locks are only taken in ``with`` blocks (add_done_callback): concurrent.futures.wait
      takes them in a loop outside any, and a KeyboardInterrupt between two of them leaves one held, so
      that the worker finishing that future blocks for ever and the pool's shutdown with it."""
    if not futures:
        return
    settled = threading.Event()
    lock = threading.Lock()
    left = [len(futures)]

    def done(f: Future) -> None:
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if last or (return_when == FIRST_EXCEPTION and not f.cancelled() and f.exception() is not None):
            settled.set()

    for f in futures:
        f.add_done_callback(done)
    while not settled.wait(SIGNAL_CHECK_S):
        pass


def run_parallel(tasks: list[Callable[[threading.Event], T]], parallelism: int,
                 cancel: threading.Event | None = None) -> list[T]:
    """Run tasks on a thread pool; each gets a cancel Event it should check between reads.

    Returns results in task order. On the first exception (or Ctrl-C in the caller) the event is set,
    queued tasks are dropped, running ones stop at their next check, and the first error is raised.
    ``cancel``: the event, when a caller running this in the background sets it to stop the tasks.
    """
    cancel = cancel or threading.Event()
    if not tasks:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(parallelism, len(tasks))), thread_name_prefix="statectl") as pool:
        futures: list[Future[T]] = []
        try:
            # Submitted inside the try: a Ctrl-C while tasks are being submitted must cancel those already
            # running (one waiting for a rate limit's bytes could otherwise keep the pool open for minutes).
            for t in tasks:
                futures.append(pool.submit(t, cancel))
            wait_for(futures, FIRST_EXCEPTION)
            failed = [f for f in futures if f.done() and not f.cancelled() and f.exception() is not None]
            if failed:
                cancel.set()
                for f in futures:
                    f.cancel()
                wait_for(futures)
                errors = [f.exception() for f in futures if f.done() and not f.cancelled() and f.exception()]
                real = [e for e in errors if not isinstance(e, Cancelled)]
                raise (real or errors)[0]
        except BaseException:
            cancel.set()
            for f in futures:
                f.cancel()
            raise
        return [f.result() for f in futures]


MAX_PARALLELISM = 256


def check_parallelism(value: int) -> None:
    """Raise UsageError unless 1 <= value <= MAX_PARALLELISM: each unit is a thread and a connection, and
    a typo such as ``-j 100000`` must not exhaust the host's threads."""
    if not 1 <= value <= MAX_PARALLELISM:
        raise UsageError(f"--parallelism must be between 1 and {MAX_PARALLELISM}, not {value}")
