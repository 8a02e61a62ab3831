"""Failpoints: named places where a test can make statectl die, to prove crash safety.

``STATECTL_FAILPOINTS="after-index-upload=kill,cleanup=kill"`` makes the process SIGKILL itself when it
reaches those points (``=sleep:SECONDS`` pauses instead). Unset in production: ``hit`` is then one
dict lookup.
"""

from __future__ import annotations

import os
import signal
import time

_points: dict[str, str] | None = None


def _load() -> dict[str, str]:
    spec = os.environ.get("STATECTL_FAILPOINTS", "")
    out = {}
    for item in filter(None, (p.strip() for p in spec.split(","))):
        name, _, action = item.partition("=")
        out[name] = action or "kill"
    return out


def hit(name: str) -> None:
    """Act on failpoint ``name`` if one is configured; otherwise do nothing."""
    global _points
    if _points is None:
        _points = _load()
    action = _points.get(name)
    if action is None:
        return
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action.startswith("sleep:"):
        time.sleep(float(action[6:]))
