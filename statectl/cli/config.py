"""statectl config show"""

from __future__ import annotations

import typer

from statectl.cli.common import (
    BlobstoreOpt,
    Env,
    JobIdOpt,
    JobOpt,
    KafkaOpt,
    KeepLastOpt,
    ParallelismOpt,
    S3EndpointOpt,
    StateDirOpt,
    StoreOpt,
    TaskOpt,
    print_json,
)

app = typer.Typer(help="Inspect statectl's settings.", no_args_is_help=True, rich_markup_mode=None)


@app.command("show", epilog="Examples:\n\n  statectl config show\n\n  statectl --profile staging config show -o json\n\n"
                            "Exit codes: 0 ok, 2 bad config file or value.")
def show(
    ctx: typer.Context,
    blobstore: BlobstoreOpt = None,
    s3_endpoint: S3EndpointOpt = None,
    kafka: KafkaOpt = None,
    job: JobOpt = None,
    job_id: JobIdOpt = None,
    task: TaskOpt = None,
    store: StoreOpt = None,
    state_dir: StateDirOpt = None,
    parallelism: ParallelismOpt = None,
    keep_last: KeepLastOpt = None,
) -> None:
    """Print the effective settings and where each came from (flag, env, profile, default); secrets masked.
    Takes the same state flags as the other commands, to show what they would resolve to."""
    env = Env(ctx, blobstore=blobstore, s3_endpoint=s3_endpoint, kafka=kafka, job=job, job_id=job_id, task=task,
              store=store, state_dir=str(state_dir) if state_dir else None, parallelism=parallelism,
              keep_last=keep_last)
    s = env.settings
    rows = [{"key": name, "value": s.masked(name), "source": value.source} for name, value in s.items()]
    if env.json:
        print_json({"config_file": str(s.config_file) if s.config_file else None, "profile": s.profile,
                    "settings": rows})
        return
    width = max(len(r["key"]) for r in rows)
    lines = [f"config file: {s.config_file or '(none)'}", f"profile:     {s.profile}", ""]
    lines += [f"{r['key']:<{width}}  {'' if r['value'] is None else r['value']!s:<40}  {r['source']}" for r in rows]
    env.emit(None, "\n".join(lines))
