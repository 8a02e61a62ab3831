"""statectl.parallel.run_parallel: results in order, the first error cancels the rest, and an interrupt at any
moment (even while tasks are still being submitted) sets the cancel event of the tasks already running."""

from __future__ import annotations

import threading

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
