"""adstore seal-checkpoint's options: every name it writes into the checkpoint topic or reads as a path is
checked before anything connects (the Tansu tests in tests/integration/test_adstore_seal.py cover the rest)."""

from __future__ import annotations

from pathlib import Path

import pytest

from statectl.engine.adstore.seal import SealOptions
from statectl.errors import UsageError


@pytest.mark.parametrize("task", ["Partition\n0", "red\x1b[31m", "x" * 300])
def test_a_task_name_that_cannot_be_a_file_name_is_refused(task: str):
    with pytest.raises(UsageError, match="invalid task"):
        SealOptions("127.0.0.1:9", "pv", "members", Path("/state"), tasks=("Partition 1", task)).validate()


def test_the_names_taken():
    SealOptions("127.0.0.1:9", "pv", "members", Path("/state"), tasks=("Partition 0", "t" * 200)).validate()
