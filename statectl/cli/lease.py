"""statectl lease show | break: a store's backup lease, read or broken."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from statectl.cli.base import exit_codes_epilog
from statectl.cli.common import BLOBSTORE, STORE_REF, Env, state_command
from statectl.errors import NotFoundError, UsageError, command

app = typer.Typer(help="Inspect or break the lease that keeps two backups of a store from running at once.",
                  no_args_is_help=True, rich_markup_mode=None)

BREAK_EPILOG = (
    "A backup or gc takes the store's lease (leases/<job>/<job-id>/<task>/<store>.json in the blob store) and "
    "renews it while it runs. A holder that was killed on this host frees it at once; one killed on another host "
    "holds it until it expires (5 minutes after its last renewal). Break it sooner only when you know the holder "
    "is gone: a holder still running then fails before it commits, and nothing else changes.\n\n"
    "Examples:\n\n"
    "  statectl lease show --job page-views --store counts --task 'Partition 0'\n\n"
    "  statectl lease break --job page-views --store counts --task 'Partition 0' --yes\n\n"
    + exit_codes_epilog(0, (2, "usage (no --yes and no terminal to ask on)"), (10, "no lease"),
                        (11, "held by a running process on this host (without --force), or taken over meanwhile"))
)


def _describe(h, problem: str = "") -> str:
    holder = f"{h.operation} on host {h.host or '?'}, pid {h.pid}, since {h.started or '?'}"
    if h.released and not problem:  # it binds nobody: no expiry to show
        by = f" (broken by {h.broken_by})" if h.broken_by else ""
        return f"lease of {h.store or h.key}: released at {h.released_at or '?'}{by}; last held by {holder}"
    if problem:
        state = f"malformed ({problem}); it binds nobody: a backup takes it over, 'lease break' replaces it"
    else:
        state = "held" if h.live else "stale (expired or left by a dead process)"
    return f"lease of {h.store or h.key}: {state}; {holder}, expires {h.expires or '?'}"


@app.command("show", epilog="Example:\n\n  statectl lease show --job page-views --store counts\n\n"
                            + exit_codes_epilog(0, (10, "the store has no lease")))
@state_command(*BLOBSTORE, *STORE_REF)
def show(env: Env) -> None:
    """Show who holds a store's lease, since when and until when (UTC). Read-only."""
    from statectl.catalog.lease import inspect_lease

    ref, blobstore = env.session.ref(), env.session.blobstore
    found = inspect_lease(blobstore, ref)
    if found is None:
        raise NotFoundError(f"no lease of {ref} in {blobstore.url}", hint="no backup of it ever ran there")
    holder, problem = found
    env.emit(holder, _describe(holder, problem))


@app.command("break", epilog=BREAK_EPILOG)
@state_command(*BLOBSTORE, *STORE_REF)
def break_(
    env: Env,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Break it even when its holder is a running process on this host.")] = False,
) -> None:
    """Release a store's lease left by a crashed backup, after showing its holder and asking.

    Writes a released lease record; changes no snapshot or blob. See man statectl-lease-break."""
    from statectl.catalog.lease import break_lease, inspect_lease

    ref = env.session.ref()
    if not yes and not sys.stdin.isatty():
        raise UsageError("lease break needs confirmation and there is no terminal to ask on",
                         hint=("pass --yes (after ", command("lease show"), " to see the holder)"))
    blobstore = env.session.blobstore
    found = inspect_lease(blobstore, ref)
    if found is None:
        raise NotFoundError(f"no lease of {ref} in {blobstore.url}", hint="no backup of it ever ran there")
    holder, problem = found
    if (problem or not holder.released) and not yes:
        sys.stderr.write(_describe(holder, problem) + "\n")
        if not typer.confirm("Break it?", default=False, err=True):
            raise typer.Exit(1)
    done = break_lease(blobstore, ref, expected=holder, force=force)
    if problem:
        text = f"replaced the malformed lease record of {ref} ({problem}) with a released one"
    elif holder.released:
        text = f"lease of {ref} was already released"
    else:
        text = f"broke the lease of {ref}"
    env.emit(done, text)
