"""statectl standby follow | status | promote | failover | check: one module per command (failover's shared with
promote --container), their options and helpers in shared. The reasoning behind each is in docs/standby.md."""

from __future__ import annotations

import typer

from statectl.cli.standby import failover, follow, promote, status

app = typer.Typer(help="Hot replicas of a store kept current from its changelog, promoted in seconds.",
                  no_args_is_help=True, rich_markup_mode=None)
app.command("follow", epilog=follow.EPILOG)(follow.follow)
app.command("status", epilog=status.STATUS_EPILOG)(status.status)
app.command("promote", epilog=promote.EPILOG)(promote.promote)
app.command("failover", epilog=failover.EPILOG)(failover.failover)
app.command("check", epilog=status.CHECK_EPILOG)(status.check)
