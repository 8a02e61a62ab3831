"""What an adapter's ``probe()`` returns: one :class:`Check` per thing it examined.

Each adapter package that talks to something outside the process offers a ``probe`` module (blobstore,
kafka, rocks, spark, local) whose ``probe(...)`` returns a list of checks, one per name of its ``NAMES``,
in that order, and never raises for what it finds: a broken set-up is a check with status ``fail``, a
check with nothing to examine is ``skip``. ``statectl doctor`` runs them in turn (statectl.engine.doctor).
"""

from __future__ import annotations

from dataclasses import dataclass

OK, FAIL, SKIP = "ok", "fail", "skip"
UNEXPECTED_HINT = "run again with --debug, and report it"


@dataclass
class Check:
    """One check's outcome: ``status`` is ok, fail or skip; ``detail`` is one line; ``hint`` says what to do.

    An ok check may carry a hint too, for something that works but deserves the operator's attention
    (its ``detail`` then says what, since the text output shows hints only under failures)."""

    name: str
    status: str
    detail: str
    hint: str | None = None


def skipped(names: tuple[str, ...] | list[str], detail: str, hint: str | None = None) -> list[Check]:
    """A skipped check for each of ``names``, all for the same reason."""
    return [Check(name, SKIP, detail, hint) for name in names]


def dist_version(name: str) -> str:
    """The installed version of the distribution ``name``, or ``(version unknown)``."""
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "(version unknown)"
