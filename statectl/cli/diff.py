"""statectl diff: a store dir or a snapshot against a snapshot, through engine.diff, rendered."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from statectl.cli.base import exit_codes_epilog
from statectl.cli.common import STORE, Env, human_bytes, state_command

EPILOG = (
    "Examples:\n\n"
    "  statectl diff --job page-views --state-dir /var/samza/state --store counts   # local store vs latest snapshot\n\n"
    "  statectl diff --job page-views --store counts --snapshot 3f2a9c --against 1d2e3f\n\n"
    + exit_codes_epilog((0, "same"), (1, "different"), (10, "no such snapshot"))
)


@state_command(*STORE)
def diff(
    env: Env,
    snapshot: Annotated[Optional[str], typer.Option("--snapshot", help="Snapshot to compare (default: the latest).", show_default=False)] = None,
    against: Annotated[Optional[str], typer.Option("--against", help="Compare --snapshot with this snapshot instead of the local store.", show_default=False)] = None,
) -> None:
    """Show what differs between the local store and a snapshot, or between two snapshots.

    Read-only: lists the files a backup now would add and remove (or what --snapshot adds to --against),
    and exits 1 when there is any, for scripts. See man statectl-diff or docs/backup.md."""
    from pathlib import Path

    from statectl.engine.diff import DiffOptions
    from statectl.engine.diff import diff as run_diff

    session, store_dir = env.session, env.flags.store_dir
    sdir = session.store_dir(store_dir) if against is None else (store_dir or Path("."))
    r = run_diff(DiffOptions(session.ref(), sdir, snapshot, against), session.blobstore, session.catalog)
    changed = {c.path: c for c in r.changed}  # a rewritten file: one "~" line, not "+" and "-"
    added = [e for e in r.added if e.path not in changed]
    removed = [e for e in r.removed if e.path not in changed]
    lines = [f"+ {e.path} ({human_bytes(e.size)})" for e in added]
    lines += [f"~ {c.path} ({human_bytes(c.size)}, was {human_bytes(c.old_size)})" for c in r.changed]
    lines += [f"- {e.path} ({human_bytes(e.size)})" for e in removed]
    lines.append(f"{len(added)} added ({human_bytes(sum(e.size for e in added))}), {len(r.changed)} changed "
                 f"({human_bytes(sum(c.size for c in r.changed))}), {len(r.retained)} unchanged, {len(removed)} "
                 f"removed ({human_bytes(sum(e.size for e in removed))}): {r.new} vs {r.old} (in {r.blobstore})")
    env.emit(r, "\n".join(lines))
    if not r.same:
        raise typer.Exit(1)
