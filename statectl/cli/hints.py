"""A hint's commands completed with the scope of the invocation that failed.

An error's hint names the commands to run as statectl.errors.Command (their words and own options). At the
CLI's edge each is completed with what the failing invocation was given on its command line that says where
the state is (SCOPE: the blob store and its S3 endpoint, Kafka, ZooKeeper, the job, task and store, the
state dir, a standby's changelog, the snapshot; and the global --config and --profile), each only when the
command takes that flag: after ``--blobstore s3://prod/samza`` the hint's ``snapshots list`` lists that blob
store, not the local default. A hint that runs the failing command itself again (``backup ... --create``)
keeps all of its flags and arguments. What came from the environment or the profile is not repeated: the
same shell and profile give it again. No flag statectl takes holds a secret (those come from the environment
or the profile only).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from statectl.errors import Command, StatectlError, render_hint

# The settings flags that say where the state is (cli.common.Flags), in the order a hint writes them; a standby's
# changelog and partition; the snapshot named (an option of restore and diff, the argument of snapshots show,
# verify and copy).
SCOPE = ("blobstore", "s3_endpoint", "kafka", "zookeeper", "job", "job_id", "task", "store", "state_dir",
         "standby_root", "store_dir", "changelog", "partition", "snapshot")


@dataclass(frozen=True)
class Invocation:
    """What one command run was given on its command line: its command ``words``, the ``given`` parameters
    (name, value), and the global ``--config`` / ``--profile`` (None: not given)."""

    words: tuple[str, ...]
    given: tuple[tuple[str, Any], ...]
    config: str | None = None
    profile: str | None = None


def invocation(ctx: Any, *, config: str | None = None, profile: str | None = None) -> Invocation:
    """The Invocation of the command whose click context is ``ctx``: the parameters the command line gave."""
    given = tuple((name, value) for name, value in ctx.params.items()
                  if value is not None and _source(ctx, name) == "COMMANDLINE")
    return Invocation(tuple(ctx.command_path.split()[1:]), given, config, profile)


def _source(ctx: Any, name: str) -> str:
    source = ctx.get_parameter_source(name)
    return getattr(source, "name", "")


def hint_text(e: StatectlError, root: Any, inv: Invocation | None) -> str | None:
    """``e``'s hint with each of its commands completed for ``inv`` (as given when there is no invocation:
    the error came before the command ran). ``root``: the statectl click group, to look the commands up."""
    if inv is None:
        return e.hint
    return render_hint(e.hint_parts, lambda c: complete(c, root, inv)) or None


def complete(cmd: Command, root: Any, inv: Invocation) -> str:
    """``cmd`` as a shell command line, with the flags of ``inv`` it takes (see the module doc)."""
    target = _lookup(root, cmd.words)
    if target is None:  # not a command of this statectl: said as it is given
        return str(cmd)
    params = {p.name: p for p in target.params}
    by_opt = {o: p.name for p in target.params for o in (*p.opts, *p.secondary_opts)}
    own = {by_opt.get(a.split("=", 1)[0]) for a in cmd.args if a.startswith("-")}
    again = cmd.words == inv.words
    given = dict(inv.given)
    names = list(given) if again else [n for n in SCOPE if n in given]
    options: list[str] = []
    arguments: list[str] = []
    for name in names:
        p = params.get(name)
        if p is None or name in own or name in cmd.without:
            continue
        if p.param_type_name == "argument":
            arguments += [str(v) for v in _values(given[name])]
        else:
            options += _option(p, given[name])
    globals_ = [*(["--config", inv.config] if inv.config else []), *(["--profile", inv.profile] if inv.profile else [])]
    if any(a.startswith("-") for a in arguments):
        arguments.insert(0, "--")
    return shlex.join(["statectl", *globals_, *cmd.words, *options, *cmd.args, *arguments])


def _lookup(root: Any, words: tuple[str, ...]) -> Any:
    cmd = root
    for w in words:
        cmd = getattr(cmd, "commands", {}).get(w)
        if cmd is None:
            return None
    return None if getattr(cmd, "commands", None) else cmd


def _values(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _option(p: Any, value: Any) -> list[str]:
    """The words that give option ``p`` the ``value`` it was given: its long name (and the value)."""
    name = max(p.opts, key=len)
    if p.is_flag:
        if value:
            return [name]
        return [max(p.secondary_opts, key=len)] if p.secondary_opts else []
    out: list[str] = []
    for v in _values(value):
        out += [name, str(getattr(v, "value", v))]
    return out
