"""The bound on a task's drain callback (``task.callback.drain.timeout.ms``): a block that runs longer
fails with CallbackTimeoutError, as Samza's RunLoop fails a callback that times out."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from statectl.errors import StatectlError


class CallbackTimeoutError(StatectlError):
    """A task's drain callback ran longer than ``task.callback.drain.timeout.ms``."""


@contextmanager
def callback_deadline(seconds: float | None, message: str) -> Iterator[None]:
    """Bound the block to ``seconds`` (None: unbounded). In the main thread a SIGALRM interrupts the block
    when the time is up (so a callback stuck in a sleep or a loop is stopped); anywhere, a block that
    returns late raises too (a callback that swallowed the interruption). Raises CallbackTimeoutError
    with ``message``."""
    if seconds is None:
        yield
        return
    start = time.monotonic()
    alarm = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    previous = None
    if alarm:
        def on_alarm(signum, frame) -> None:  # noqa: ARG001 - signal handler signature
            raise CallbackTimeoutError(message)

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    if time.monotonic() - start > seconds:
        raise CallbackTimeoutError(message)
