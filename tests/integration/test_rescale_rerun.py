"""statectl rescale run twice, cut in its commit, or given sources that are not the layout it assumes. Whole
statectl processes; real spark-submit (local[2]) where a rescale reaches the Spark job, real rocksdict, a
file:// blob store or SeaweedFS, Tansu for the jobs' checkpoint topics.

- The rescale is recorded before its first commit: run again after a kill in its commit it commits the rest
  of its targets from their uploads (no Spark job); run again when done it writes nothing (exit 0); when
  the sources changed since it refuses (exit 1). The same for the key-group path, cut with exit 3.
- Before anything is written it refuses sources that are not the --from layout: snapshots of other tasks
  in the store, files whose keys (key groups) belong to another task, and (in the executors) any such key.
- Every refusal it can make before the Spark job gives the same exit code with --dry-run, and writes nothing.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pytest

from statectl.formats.adstore import partition_of
from tests.integration.test_rescale import STORE, _latest, _make_sources, _nothing_committed, _restored
from tests.tools.standby_helpers import STATECTL, clean_env, cli, cli_here

pytestmark = pytest.mark.timeout(900)
SPARK = ["--master", "local[2]"]


def _listing(root: Path) -> list[tuple[str, int, int]]:
    """Every file under a file:// blob store's root, with its size and mtime: what a command wrote there."""
    return sorted((str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns)
                  for p in root.rglob("*") if p.is_file() and not p.name.endswith(".lock"))


def _same_code_dry(tmp: Path, args: list[str], code: int, *words: str) -> None:
    """``args`` refused with ``code`` naming ``words``, with and without --dry-run (the dry run in this process,
    the command itself a whole statectl process)."""
    for extra, run in ((["--dry-run"], cli_here), ([], cli)):
        p = run(tmp, *args, *extra, code=code, timeout=300)
        for w in words:
            assert w in p.stderr, (extra, w, p.stderr)


def _fresh(expected: dict[bytes, bytes], m: int, j: int) -> dict[bytes, bytes]:
    return {k: v for k, v in expected.items() if partition_of(k, m) == j}


def test_killed_in_its_commit_run_again_finishes_then_is_done(tmp_path: Path, tansu):
    """Within one job with its Kafka checkpoint topic, 2 -> 3, killed after committing Partition 0: run
    again, it commits Partition 1 and 2 from their uploads (the sources of Partition 0 and 1 are now one
    target and one old source: reading them again would lose keys), and every target is a fresh
    partitioning of the sources. Run again once more: done, nothing written. --again: refused (Partition 2
    is not a source; with --ignore-other-tasks the 3-way snapshots are not a 2-way layout). After a new
    backup of a source: refused, the dry run too."""
    from statectl.catalog.kafka_log import KafkaCheckpointLog
    from statectl.formats.checkpoint import BLOB_STORE_FACTORY

    blobs_dir = tmp_path / "blobs"
    blobs = f"file://{blobs_dir}"
    job = f"again-{os.getpid()}-{tmp_path.name[-6:]}"
    kafka = ["--kafka", tansu.bootstrap]
    expected = _make_sources(tmp_path, blobs, job, 2, 11, *kafka)
    before = {p: _latest(tmp_path, blobs, job, f"Partition {p}") for p in range(2)}
    args = ["rescale", "--blobstore", blobs, *kafka, "--job", job, "--store", STORE, "--from", "2", "--to", "3",
            "--work-dir", str(tmp_path), *SPARK, "-o", "json"]
    p = subprocess.run([STATECTL, *args], env=dict(clean_env(tmp_path), STATECTL_FAILPOINTS="rescale-commit=1*off->kill"),
                       cwd=tmp_path, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert p.returncode == -9, (p.returncode, p.stderr)
    cut = [_latest(tmp_path, blobs, job, f"Partition {j}") for j in range(3)]
    assert cut[0][1:] == before[0] and cut[1] == before[1] and cut[2] == []  # Partition 0 committed only

    stored = _listing(blobs_dir)
    dry = json.loads(cli_here(tmp_path, *args, "--dry-run").stdout)
    assert dry["dry_run"] and dry["rerun"] == "finished" and not dry["committed"]
    assert _listing(blobs_dir) == stored
    r = json.loads(cli(tmp_path, *args, timeout=300).stdout)
    assert r["rerun"] == "finished" and r["verified"] and r["committed"] and r["keys"] == len(expected)
    assert r["bytes_read"] == 0 and "spark_s" not in r["phases"]  # no Spark job: the uploads were committed
    assert r["targets"][0]["snapshot_id"] == cut[0][0]
    with KafkaCheckpointLog(tansu.bootstrap, job, "1") as log:
        latest, _ = log.latest_checkpoints()
    for j in range(3):
        assert _latest(tmp_path, blobs, job, f"Partition {j}")[0] == r["targets"][j]["snapshot_id"]
        assert latest[f"Partition {j}"].state_checkpoint_markers[BLOB_STORE_FACTORY][STORE] == \
            r["targets"][j]["snapshot_id"]
        assert _restored(tmp_path, blobs, job, f"Partition {j}") == _fresh(expected, 3, j)

    stored = _listing(blobs_dir)
    for extra, run in ((["--dry-run"], cli_here), ([], cli)):
        done = json.loads(run(tmp_path, *args, *extra).stdout)
        assert done["rerun"] == "done" and done["committed"] and done["keys"] == len(expected)
        assert [t["snapshot_id"] for t in done["targets"]] == [t["snapshot_id"] for t in r["targets"]]
    assert _listing(blobs_dir) == stored
    text = cli(tmp_path, *args[:-2]).stdout
    assert "done before; nothing to do" in text

    _same_code_dry(tmp_path, args + ["--again"], 1, "besides the 2 of --from", "Partition 2", "--ignore-other-tasks")
    p = cli(tmp_path, *args, "--again", "--ignore-other-tasks", code=1, timeout=300)
    assert "not a 2-way layout" in p.stderr, p.stderr
    assert _listing(blobs_dir) == stored

    # a new backup of source Partition 1 since: the recorded rescale read other snapshots
    restored = tmp_path / "state2"
    cli_here(tmp_path, "restore", "--blobstore", blobs, *kafka, "--job", job, "--store", STORE, "--task",
             "Partition 1", "--state-dir", str(restored))
    cli_here(tmp_path, "backup", "--blobstore", blobs, *kafka, "--job", job, "--store", STORE, "--task",
             "Partition 1", "--state-dir", str(restored))
    stored = _listing(blobs_dir)
    _same_code_dry(tmp_path, args, 1, "this rescale was done", "source Partition 1 has snapshot", "--again")
    assert _listing(blobs_dir) == stored


def _misplaced_sources(tmp: Path, blobs: str, job: str) -> bytes:
    """Two sources of a 2-way murmur2 layout, one SST file each, but one key of Partition 1 is in Partition 0
    instead, between its smallest and largest (its MANIFEST bounds are its own); backed up. Returns that key:
    the key count and content hash of the sources and targets agree, only its place says it is wrong."""
    import rocksdict

    keys = [b"user-%05d" % i for i in range(400)]
    mine = {p: [k for k in keys if partition_of(k, 2) == p] for p in range(2)}
    stray = next(k for k in mine[1] if mine[0][0] < k < mine[0][-1])
    for p in range(2):
        path = tmp / "state" / STORE / f"Partition_{p}"
        path.parent.mkdir(parents=True, exist_ok=True)
        db = rocksdict.Rdict(str(path), rocksdict.Options(raw_mode=True))
        for k in [k for k in mine[p] if k != stray] + ([stray] if p == 0 else []):
            db[k] = b"v-" + k
        db.flush()
        db.close()
        cli_here(tmp, "backup", "--create", "--blobstore", blobs, "--job", job, "--store", STORE, "--task",
                 f"Partition {p}", "--state-dir", str(tmp / "state"))
    return stray


def test_a_key_outside_its_task_is_refused_by_the_executors_and_the_log_named_is_kept(tmp_path: Path):
    """The executors check every source key against --from while they read: a key of Partition 1 in
    Partition 0 (inside its file's key range, so the MANIFEST check cannot see it) ends the Spark job,
    exit 1 naming the key, nothing committed; the hint names the Spark job's log, which is still there."""
    blobs = f"file://{tmp_path / 'blobs'}"
    stray = _misplaced_sources(tmp_path, blobs, "stray")
    work = tmp_path / "work"
    p = cli(tmp_path, "rescale", "--blobstore", blobs, "--job", "stray", "--to-job", "stray3", "--store", STORE,
            "--from", "2", "--to", "3", "--work-dir", str(work), *SPARK, code=1, timeout=300)
    assert "not a 2-way layout" in p.stderr and repr(stray) in p.stderr, p.stderr
    _nothing_committed(tmp_path, blobs, "stray3", 3)
    hint = next(line for line in p.stderr.splitlines() if line.startswith("Hint:"))
    log = Path(hint.split("see ", 1)[1].split()[0])
    assert log.is_file() and "not a 2-way layout" in log.read_text(errors="replace"), hint
    assert not [d for d in work.iterdir() if d.is_dir()], "the work dir outlived the rescale"


def test_a_key_its_target_does_not_own_is_refused_by_the_writers_naming_it(tmp_path: Path):
    """The executors that write a target check every key against the partitioner: a partitioner that gives a
    key another task each time it is asked (a job's bug) sends keys to targets that do not own them; the
    writers refuse them, naming one and its task, exit 1, nothing committed, and it is the Spark job that said
    so (its log, which the hint names, has it): the targets are never read back."""
    (tmp_path / "jobparts").mkdir()
    (tmp_path / "jobparts" / "flip.py").write_text(
        "import itertools\n\n_calls = itertools.count()\n\n\ndef flip(key, n):\n    return next(_calls) % n\n")
    blobs = f"file://{tmp_path / 'blobs'}"
    _make_sources(tmp_path, blobs, "flip", 2, 9)
    p = subprocess.run([STATECTL, "rescale", "--blobstore", blobs, "--job", "flip", "--to-job", "flipped", "--store",
                        STORE, "--from", "2", "--to", "2", "--partitioner", "flip:flip", "--from-partitioner", "murmur2",
                        "--work-dir", str(tmp_path / "work"), *SPARK],
                       env=dict(clean_env(tmp_path), PYTHONPATH=str(tmp_path / "jobparts")), cwd=tmp_path,
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert "verification failed" in p.stderr and "belong to another task (e.g. b'" in p.stderr, p.stderr
    _nothing_committed(tmp_path, blobs, "flipped", 2)
    hint = next(line for line in p.stderr.splitlines() if line.startswith("Hint:"))
    log = Path(hint.split("see ", 1)[1].split()[0])
    assert "belong to another task" in log.read_text(errors="replace"), hint


def test_refusals_before_writing_exit_the_same_with_dry_run(tmp_path: Path):
    """No Spark job: each refusal the rescale makes before writing exits with the same code with --dry-run,
    and the blob store is as it was."""
    blobs_dir = tmp_path / "blobs"
    blobs = f"file://{blobs_dir}"
    _make_sources(tmp_path, blobs, "par", 2, 5)
    base = ["rescale", "--blobstore", blobs, "--job", "par", "--store", STORE, "--work-dir", str(tmp_path / "work"),
            *SPARK]
    task_map = tmp_path / "map.json"
    stored = _listing(blobs_dir)

    for names, words in ((["../../x", "b", "c"], ["'../../x'"]), (["a\nb", "b", "c"], ["control character"]),
                         ([" ", "b", "c"], ["blank"]), (["x" * 300, "b", "c"], ["too long"])):
        task_map.write_text(json.dumps({"to": names}))
        _same_code_dry(tmp_path, base + ["--from", "2", "--to", "3", "--task-map", str(task_map)], 2, "--task-map",
                       *words)
    # a partitioner that does not import: refused before any Spark job (no work dir, no log)
    _same_code_dry(tmp_path, base + ["--from", "2", "--to", "3", "--partitioner", "no_such_module:route"], 2,
                   "no_such_module")
    _same_code_dry(tmp_path, base + ["--from", "2", "--to", "3", "--from-partitioner", "no_such_module:route"], 2,
                   "--from-partitioner")
    assert not (tmp_path / "work").exists()
    # no Java: the Spark job could not start
    for extra in (["--dry-run"], []):
        p = subprocess.run([STATECTL, *base, "--from", "2", "--to", "3", "--to-job", "par3", *extra],
                           env=dict(clean_env(tmp_path), JAVA_HOME=str(tmp_path)), cwd=tmp_path, capture_output=True,
                           text=True, timeout=300, stdin=subprocess.DEVNULL)
        assert p.returncode == 13 and "needs Java" in p.stderr, (extra, p.returncode, p.stderr)
    # --from 1 of a store of two tasks: the rescale would leave Partition 1 out
    _same_code_dry(tmp_path, base + ["--from", "1", "--to", "2", "--to-job", "par2"], 1, "Partition 1",
                   "besides the 1 of --from")
    # the sources swapped: every key of each belongs to the other (their files' bounds say so)
    task_map.write_text(json.dumps({"from": ["Partition 1", "Partition 0"]}))
    _same_code_dry(tmp_path, base + ["--from", "2", "--to", "3", "--task-map", str(task_map)], 1,
                   "not a 2-way layout by murmur2", "of Partition 1", "belongs to Partition 0")
    assert _listing(blobs_dir) == stored


def _s3(tmp: Path, seaweed) -> None:
    """statectl.toml in ``tmp`` (the dir cli() runs in): the SeaweedFS endpoint and credentials."""
    (tmp / "statectl.toml").write_text(
        f'[default]\ns3_endpoint = "{seaweed.endpoint}"\ns3_region = "us-east-1"\n'
        f's3_access_key_id = "{seaweed.access_key}"\ns3_secret_access_key = "{seaweed.secret_key}"\n')


def _s3_listing(url: str, seaweed) -> list[tuple[str, int, float]]:
    from statectl.blobstore import S3Options, open_blobstore

    store = open_blobstore(url, s3=S3Options(endpoint_url=seaweed.endpoint, region="us-east-1",
                                             access_key_id=seaweed.access_key,
                                             secret_access_key=seaweed.secret_key))
    try:
        return sorted((b.key, b.size, b.modified_at) for b in store.list(""))
    finally:
        store.close()


def test_key_groups_cut_with_exit_3_finished_then_done_and_refused_as_a_repeat(tmp_path: Path, seaweed, s3_url):
    """On SeaweedFS, within one job, 4 -> 8 by key groups: the commit of the third target fails (exit 3,
    the hint says to run the same command again); run again it commits the rest; once more it is done and
    writes nothing. The repeat as a new rescale (--again) is refused: Partition 4..7 are not sources; and
    with --ignore-other-tasks the 8-way snapshots are not a 4-way layout (a source's files lie outside its
    key groups), from the MANIFESTs, the dry run too. A store of 64 key groups rescaled with --key-groups
    128 is refused the same way instead of losing the keys of three sources."""
    from statectl.formats.keygroups import key_group, task_of
    from tests.integration.test_rescale_keygroups import GROUPS
    from tests.integration.test_rescale_keygroups import _make_sources as make_kg_sources

    _s3(tmp_path, seaweed)
    expected = make_kg_sources(tmp_path, s3_url, "kgw", 4)
    args = ["rescale", "--blobstore", s3_url, "--job", "kgw", "--store", STORE, "--from", "4", "--to", "8",
            "--key-groups", str(GROUPS), "--work-dir", str(tmp_path), *SPARK, "-o", "json"]
    p = subprocess.run([STATECTL, *args], env=dict(clean_env(tmp_path), STATECTL_FAILPOINTS="rescale-commit=2*off->raise"),
                       cwd=tmp_path, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert p.returncode == 3, (p.returncode, p.stderr)
    assert "committed 2 of 8 targets" in p.stdout + p.stderr and "run the same command again" in p.stdout + p.stderr
    r = json.loads(cli(tmp_path, *args, timeout=300).stdout)
    assert r["rerun"] == "finished" and r["committed"]
    for j in range(8):
        want = {k: v for k, v in expected.items() if task_of(key_group(k, GROUPS), 8, GROUPS) == j}
        assert _restored(tmp_path, s3_url, "kgw", f"Partition {j}") == want, j
        assert _latest(tmp_path, s3_url, "kgw", f"Partition {j}")[0] == r["targets"][j]["snapshot_id"]

    stored = _s3_listing(s3_url, seaweed)
    done = json.loads(cli(tmp_path, *args).stdout)
    assert done["rerun"] == "done" and [t["snapshot_id"] for t in done["targets"]] == \
        [t["snapshot_id"] for t in r["targets"]]
    _same_code_dry(tmp_path, args + ["--again"], 1, "besides the 4 of --from", "Partition 4")
    _same_code_dry(tmp_path, args + ["--again", "--ignore-other-tasks"], 1, "not a 4-way layout of 128 key groups",
                   "of Partition 1 holds key groups 15..16", "owns key groups 32..63")
    assert _s3_listing(s3_url, seaweed) == stored

    other = tmp_path / "kg64"
    other.mkdir()
    _s3(other, seaweed)
    make_kg_sources(other, s3_url, "kg64", 4, groups=64)
    stored = _s3_listing(s3_url, seaweed)
    _same_code_dry(other, ["rescale", "--blobstore", s3_url, "--job", "kg64", "--to-job", "kg64x8", "--store",
                              STORE, "--from", "4", "--to", "8", "--key-groups", "128", "--work-dir", str(tmp_path),
                              *SPARK], 1, "not a 4-way layout of 128 key groups", "--key-groups")
    assert _s3_listing(s3_url, seaweed) == stored
    _nothing_committed(tmp_path, s3_url, "kg64x8", 8)
