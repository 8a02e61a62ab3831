"""What every state command shares: option types, settings, adapters, output."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from statectl.errors import UsageError

BlobstoreOpt = Annotated[Optional[str], typer.Option("--blobstore", help="Blob store URL: file:///path or s3://bucket/prefix. [env STATECTL_BLOBSTORE]", show_default=False)]
S3EndpointOpt = Annotated[Optional[str], typer.Option("--s3-endpoint", help="Endpoint URL of an S3-compatible store. [env STATECTL_S3_ENDPOINT]", show_default=False)]
KafkaOpt = Annotated[Optional[str], typer.Option("--kafka", help="Kafka bootstrap servers; checkpoints then live in the job's checkpoint topic. [env STATECTL_KAFKA]", show_default=False)]
JobOpt = Annotated[Optional[str], typer.Option("--job", help="Job name. [env STATECTL_JOB]", show_default=False)]
JobIdOpt = Annotated[Optional[str], typer.Option("--job-id", help="Job id (default 1). [env STATECTL_JOB_ID]", show_default=False)]
TaskOpt = Annotated[Optional[str], typer.Option("--task", help="Task name (default 'Partition 0'). [env STATECTL_TASK]", show_default=False)]
StoreOpt = Annotated[Optional[str], typer.Option("--store", help="Store name. [env STATECTL_STORE]", show_default=False)]
StateDirOpt = Annotated[Optional[Path], typer.Option("--state-dir", help="The job's state base dir; the store dir is DIR/<store>/<task, spaces->_>. [env STATECTL_STATE_DIR]", show_default=False)]
StoreDirOpt = Annotated[Optional[Path], typer.Option("--store-dir", help="The store dir itself (instead of --state-dir).", show_default=False)]
KeepLastOpt = Annotated[Optional[int], typer.Option("--keep-last", help="Keep the last N snapshots of each task/store restorable (default 1). [env STATECTL_KEEP_LAST]", show_default=False)]
ParallelismOpt = Annotated[Optional[int], typer.Option("--parallelism", "-j", help="Transfers in flight (default 8). [env STATECTL_PARALLELISM]", show_default=False)]


@dataclass
class GlobalOptions:
    config: Optional[str] = None
    profile: Optional[str] = None
    output: Optional[str] = None
    verbose: bool = False
    quiet: bool = False
    debug: bool = False


def global_options(ctx: typer.Context) -> GlobalOptions:
    root = ctx.find_root()
    if not isinstance(root.obj, GlobalOptions):
        root.obj = GlobalOptions()
    return root.obj


class Env:
    """Settings, adapters and output for one command run."""

    def __init__(self, ctx: typer.Context, **flags: Any):
        from statectl import config

        g = global_options(ctx)
        flags = dict(flags, output=g.output, quiet=g.quiet or None, verbose=g.verbose or None, debug=g.debug or None)
        self.settings = config.resolve(flags, config=g.config, profile=g.profile)
        from statectl import redact

        redact.add_secrets(value.value for name, value in self.settings.items() if config.KEYS[name].secret)
        for name in ("s3_endpoint", "blobstore", "kafka"):
            redact.add_url(getattr(self.settings, name))
        self.json = self.settings.output == "json"
        self._blobstore = None
        self._checkpoints = None

    # -- adapters --------------------------------------------------------------------------------

    @property
    def blobstore(self):
        if self._blobstore is None:
            from statectl.blobstore import S3Options, open_blobstore

            s = self.settings
            self._blobstore = open_blobstore(s.blobstore, retries=s.retries, retry_time_s=s.retry_time, s3=S3Options(
                endpoint_url=s.s3_endpoint, region=s.s3_region, access_key_id=s.s3_access_key_id,
                secret_access_key=s.s3_secret_access_key, session_token=s.s3_session_token,
                profile=s.s3_profile, max_connections=max(32, 2 * s.parallelism), timeout_s=s.timeout))
        return self._blobstore

    @property
    def checkpoints(self):
        """The catalog in the blob store; with --kafka the job's checkpoint topic is the commit log."""
        if self._checkpoints is None:
            from statectl.catalog.records import BlobCheckpointStore

            log = None
            if self.settings.kafka:
                from statectl.catalog.kafka_log import KafkaCheckpointLogs

                log = KafkaCheckpointLogs(self.settings.kafka)
            self._checkpoints = BlobCheckpointStore(self.blobstore, log)
        return self._checkpoints

    def progress(self):
        """Rich progress bars on a terminal; otherwise only notes, as plain lines on stderr (rich is
        not even imported: a cron run starts faster)."""
        from statectl.cli.progress import NoteProgress, RichProgress

        s = self.settings
        if sys.stderr.isatty() and not s.quiet and not self.json and not os.environ.get("CI"):
            from rich.console import Console

            return RichProgress(Console(stderr=True, markup=False, highlight=False))
        return NoteProgress(quiet=s.quiet)

    def ref(self, *, need_store: bool = True):
        from statectl.catalog.refs import StoreRef

        s = self.settings
        if not s.job:
            raise UsageError("no job given", hint="pass --job NAME (or set STATECTL_JOB, or job in statectl.toml)")
        if need_store and not s.store:
            raise UsageError("no store given", hint="pass --store NAME (or set STATECTL_STORE)")
        # Without a store (backup --all) the engine substitutes each store it finds for the placeholder;
        # StoreRef itself rejects an empty name.
        return StoreRef(s.job, s.job_id, s.task, s.store or "*")

    def store_dir(self, explicit: Optional[Path]) -> Path:
        """--store-dir, else <state-dir>/<store>/<task>."""
        from statectl.local.layout import store_dir

        if explicit is not None:
            return explicit
        s = self.settings
        if not s.state_dir:
            raise UsageError("no store dir given", hint="pass --store-dir DIR, or --state-dir DIR with --store and --task")
        if not s.store:
            raise UsageError("no store given", hint="pass --store NAME")
        return store_dir(Path(s.state_dir), s.store, s.task)

    def close(self) -> None:
        if self._checkpoints is not None:
            self._checkpoints.close()
        if self._blobstore is not None:
            self._blobstore.close()

    # -- output ----------------------------------------------------------------------------------

    def emit(self, result: Any, text: str) -> None:
        """Print the result: JSON of the dataclass under --output json, else ``text``."""
        from statectl.redact import redact

        out = json_text(result) if self.json else text
        if out:
            sys.stdout.write(redact(out) + "\n")
            sys.stdout.flush()


def to_jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {k: to_jsonable(v) for k, v in dataclasses.asdict(obj).items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, Path):
        return str(obj)
    return obj


def json_text(obj: Any) -> str:
    return json.dumps(to_jsonable(obj), indent=2, ensure_ascii=False)


def print_json(obj: Any) -> None:
    from statectl.redact import redact

    sys.stdout.write(redact(json_text(obj)) + "\n")
    sys.stdout.flush()


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"
