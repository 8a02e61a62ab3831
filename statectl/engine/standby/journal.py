"""The journal of a container's promote or failover: the steps done, so that a rerun after a kill finishes what was begun.

It lives in the standby root (``<standby root>/failover/<digest>.json``); one an older statectl left in
``<state>/.statectl-standby/failover/`` is taken over (moved to the standby root when next saved).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from statectl.engine.standby.container import StandbyContainer
from statectl.engine.standby.replica import Replica
from statectl.errors import StatectlError
from statectl.local.layout import old_standby_root, standby_root


FAILOVER_DIR = "failover"  # in the standby root: the journals of container promotes and failovers


def journal_path(state_dir: Path, job: str, job_id: str, container: str, root: Path | None = None) -> Path:
    """Where the promote/failover journal of ``container`` lives, in the standby root (``root``, default beside
    the state dir; a digest names it: the names may hold any character)."""
    digest = hashlib.sha256(json.dumps([job, job_id, container]).encode()).hexdigest()[:20]
    return standby_root(state_dir, root) / FAILOVER_DIR / f"{digest}.json"


def load_journal(state_dir: Path, sc: StandbyContainer) -> tuple[Path, Journal | None]:
    """The container's journal path and journal: the standby root's, else one an older statectl left in
    ``<state>/.statectl-standby/failover/`` (taken over: moved to the standby root when next saved)."""
    path = journal_path(state_dir, sc.job, sc.job_id, sc.container, sc.standby_root)
    journal = Journal.load(path)
    if journal is None:
        old = journal_path(state_dir, sc.job, sc.job_id, sc.container, old_standby_root(state_dir))
        journal = Journal.load(old)
        if journal is not None:
            journal.path, journal.old_path = path, old
    return path, journal


class Journal:
    """A container failover's record of the steps done, rewritten atomically after each (fsynced)."""

    def __init__(self, path: Path, data: dict[str, Any]):
        self.path, self.data = path, data
        self.old_path: Path | None = None  # where an older statectl kept it: removed once saved here

    @classmethod
    def load(cls, path: Path) -> Journal | None:
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise StatectlError(f"failover journal {path} cannot be read: {e}",
                                hint="move it away to start the failover afresh") from None
        if not isinstance(data, dict) or not isinstance(data.get("steps"), dict):
            raise StatectlError(f"failover journal {path} is malformed",
                                hint="move it away to start the failover afresh")
        return cls(path, data)

    @property
    def steps(self) -> dict[str, Any]:
        return self.data["steps"]

    @property
    def promoted(self) -> dict[str, Any]:
        return self.steps.setdefault("promote", {})

    @property
    def finished(self) -> bool:
        return bool(self.data.get("finished"))

    def save(self) -> None:
        from statectl.fsutil import write_atomic

        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, json.dumps(self.data, indent=1, sort_keys=True))
        if self.old_path is not None:
            self.old_path.unlink(missing_ok=True)
            self.old_path = None


def journal_key(rep: Replica) -> str:
    return json.dumps([rep.ref.task, rep.ref.store])
