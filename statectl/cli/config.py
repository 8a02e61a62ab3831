"""statectl config show: the effective settings and where each came from."""

from __future__ import annotations

import typer

from statectl.cli.base import exit_codes_epilog
from statectl.cli.common import STORE_REF, Env, print_json, state_command

app = typer.Typer(help="Inspect statectl's settings.", no_args_is_help=True, rich_markup_mode=None)


@app.command("show", epilog="Examples:\n\n  statectl config show\n\n  statectl --profile staging config show -o json\n\n"
                            + exit_codes_epilog(0, (2, "bad config file or value")))
@state_command("blobstore", "s3_endpoint", "kafka", *STORE_REF, "state_dir", "parallelism", "keep_last")
def show(env: Env) -> None:
    """Print the effective settings and where each came from (flag, env, profile, default); secrets masked.
    Sizes and durations as a user writes them (64MiB, 6h; JSON: bytes and seconds). Takes the same state
    flags as the other commands, to show what they would resolve to. Read-only. See docs/configuration.md."""
    s = env.settings
    rows = [{"key": name, "value": s.masked(name), "source": value.source} for name, value in s.items()]
    if env.json:
        print_json({"config_file": str(s.config_file) if s.config_file else None, "profile": s.profile,
                    "settings": rows})
        return
    width = max(len(r["key"]) for r in rows)
    lines = [f"config file: {s.config_file or '(none)'}", f"profile:     {s.profile}", ""]
    lines += [f"{r['key']:<{width}}  {s.shown(r['key']):<40}  {r['source']}" for r in rows]
    env.emit(None, "\n".join(lines))
