"""statectl.parallel.run_parallel: results in order, the first error cancels the rest, and an interrupt at any
moment (even while tasks are still being submitted) sets the cancel event of the tasks already running."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from statectl.parallel import Cancelled, run_parallel


def test_results_come_in_task_order():
    assert run_parallel([lambda cancel, i=i: i * i for i in range(20)], 4) == [i * i for i in range(20)]


def test_the_first_error_cancels_the_others_and_is_raised():
    started = threading.Event()

    def waiter(cancel: threading.Event) -> None:
        started.set()
        if cancel.wait(60):
            raise Cancelled()

    def failing(cancel: threading.Event) -> None:
        started.wait(60)
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        run_parallel([waiter, failing], 2)


class _InterruptedWhileSubmitting(list):
    """A task list whose iteration is interrupted (as by Ctrl-C) once its first task runs."""

    def __iter__(self):
        yield self[0]
        self.running.wait(60)
        raise KeyboardInterrupt


@pytest.mark.timeout(60)
def test_an_interrupt_while_submitting_cancels_the_running_tasks():
    saw_cancel: list[bool] = []
    running = threading.Event()

    def slow(cancel: threading.Event) -> None:
        running.set()
        saw_cancel.append(cancel.wait(30))  # a transfer waiting for its bytes: only the cancel event ends it

    tasks = _InterruptedWhileSubmitting([slow, slow])
    tasks.running = running
    with pytest.raises(KeyboardInterrupt):
        run_parallel(tasks, 2)
    assert saw_cancel == [True]


@pytest.mark.timeout(120)
def test_a_sigint_the_kernel_hands_to_a_worker_thread_still_interrupts_the_wait():
    """A process-wide signal may land on any thread: SIGINT sent to a worker only trips Python's handler, and
    the main thread, waiting for the tasks, must still raise KeyboardInterrupt and cancel them (not wait for a
    task that waits a minute)."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    running = threading.Event()
    cancelled: list[bool] = []
    workers: list[threading.Thread] = []

    def task(cancel: threading.Event) -> None:
        workers.append(threading.current_thread())
        running.set()
        cancelled.append(cancel.wait(60))

    def interrupt_the_worker() -> None:
        running.wait(60)
        main = threading.main_thread().ident
        while not _waiting(sys._current_frames()[main]):  # once the main thread waits for the task...
            time.sleep(0.01)
        time.sleep(0.1)  # ...blocked in its lock (had it not got there, the signal would be seen at once)
        signal.pthread_kill(workers[0].ident, signal.SIGINT)

    threading.Thread(target=interrupt_the_worker, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_parallel([task], 1)
    finally:
        signal.signal(signal.SIGINT, previous)
    workers[0].join(60)  # interrupted while starting it, the pool does not know its thread to join
    assert cancelled == [True]  # the task saw the cancel event, not the end of its wait


def _waiting(frame) -> bool:
    """Whether a thread's stack (its innermost ``frame``) is in run_parallel's wait for its tasks, in a
    Condition's wait (where it blocks on a lock)."""
    names = []
    innermost = frame
    while frame is not None:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    return "run_parallel" in names and innermost.f_code.co_name == "wait" and \
        innermost.f_code.co_filename.endswith("threading.py")
