"""``statectl doctor`` as an operator or CI runs it: a subprocess with a clean environment, against a
real file:// store, SeaweedFS (with and without enforced credentials), Tansu, and broken set-ups.

Each broken set-up must fail exactly its own check, in one line that names what is wrong, with exit 1;
bad flags stay usage errors (exit 2). The probes the doctor writes must not outlive it.
"""

from __future__ import annotations

import contextlib

import importlib.util
import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

STATECTL = str(Path(sys.executable).parent / "statectl")
NAMES = ["blob store", "kafka", "checkpoint topic", "coordinator topic", "rocksdict", "java", "spark", "state dir"]
PYSPARK = importlib.util.find_spec("pyspark") is not None


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def doctor(tmp_path: Path):
    """Run ``statectl doctor ARGS`` in a clean environment: PATH, a HOME and XDG dirs under tmp_path, AWS
    config files and instance metadata off, nothing of the caller's STATECTL_* or AWS_* settings."""
    home = tmp_path / "home"
    home.mkdir()

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
            make_blobstore: bool = True) -> subprocess.CompletedProcess:
        if make_blobstore:  # a file:// blob store a test names exists, as an operator's would (issue 22)
            for flag, value in zip(args, args[1:]):
                if flag == "--blobstore" and value.startswith("file://"):
                    with contextlib.suppress(OSError):  # e.g. a path through a file: the test's point
                        Path(value[len("file://"):]).mkdir(parents=True, exist_ok=True)
        clean = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
            "XDG_DATA_HOME": str(home / "xdg-data"), "XDG_CONFIG_HOME": str(home / "xdg-config"),
            "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        clean.update(env or {})
        return subprocess.run([STATECTL, "doctor", *args], env=clean, cwd=home, capture_output=True, text=True,
                              timeout=timeout)

    return run


def as_json(proc: subprocess.CompletedProcess, code: int) -> dict[str, dict]:
    """The checks of a ``-o json`` run, by name, after asserting the exit code and the document's shape."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    doc = json.loads(proc.stdout)
    assert set(doc) == {"ok", "checks"}
    assert [c["name"] for c in doc["checks"]] == NAMES
    for c in doc["checks"]:
        assert set(c) == {"name", "status", "detail", "hint"}
        assert c["status"] in ("ok", "fail", "skip") and isinstance(c["detail"], str) and c["detail"]
        assert "\n" not in c["detail"]
        assert c["hint"] is None or isinstance(c["hint"], str)
    failed = [c["name"] for c in doc["checks"] if c["status"] == "fail"]
    assert doc["ok"] is (not failed) and doc["ok"] is (code == 0)
    if failed:
        assert proc.stderr.strip() == f"Error: doctor: {len(failed)} check{'s' if len(failed) > 1 else ''} failed: " \
                                      + ", ".join(failed)
    return {c["name"]: c for c in doc["checks"]}


def assert_local_checks_ok(checks: dict[str, dict]) -> None:
    assert checks["rocksdict"]["status"] == "ok" and checks["rocksdict"]["detail"].startswith("rocksdict ")
    assert checks["java"]["status"] == "ok" and checks["java"]["detail"].startswith("java ")
    if PYSPARK:
        assert checks["spark"]["status"] == "ok", checks["spark"]
    else:
        assert checks["spark"] == {"name": "spark", "status": "skip", "detail": "pyspark is not installed",
                                   "hint": "pip install pyspark (only the Spark jobs need it)"}


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if not p.is_dir())


# -- everything fine ----------------------------------------------------------------------------------


def test_all_ok_on_a_file_store_with_a_state_dir(doctor, tmp_path: Path):
    blobs, state = tmp_path / "blobs", tmp_path / "state"
    state.mkdir()
    proc = doctor("--blobstore", f"file://{blobs}", "--state-dir", str(state))
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert lines[0] == f"ok   blob store         file://{blobs}: writable, TTL works"
    assert lines[1] == "skip kafka              no --kafka given"
    assert lines[2] == "skip checkpoint topic   no --kafka given"
    assert lines[3] == "skip coordinator topic  no --kafka given"
    assert lines[4].startswith("ok   rocksdict          rocksdict ")
    assert lines[5].startswith("ok   java               java ")
    if PYSPARK:
        assert lines[6].startswith("ok   spark              pyspark ")
    else:
        assert lines[6] == "skip spark              pyspark is not installed"
    assert lines[7].startswith(f"ok   state dir          {state} writable, hard links work, ")
    assert lines[7].endswith(" free")
    skipped = 3 if PYSPARK else 4
    assert lines[8] == f"all checks passed ({8 - skipped} ok, {skipped} skipped)"
    assert len(lines) == 9
    # The probes are gone: no object, TTL sidecar or lock file in the store, nothing in the state dir.
    assert files_under(blobs) == [] and list(state.iterdir()) == []


def test_a_state_dir_that_does_not_exist_yet_is_fine_and_is_not_left_behind(doctor, tmp_path: Path):
    state = tmp_path / "new" / "state"
    checks = as_json(doctor("--blobstore", f"file://{tmp_path / 'blobs'}", "--state-dir", str(state), "-o", "json"), 0)
    assert checks["state dir"]["status"] == "ok"
    assert checks["state dir"]["detail"].endswith("(does not exist yet; can be created)")
    assert not (tmp_path / "new").exists()


def test_the_default_blob_store_and_json_for_ci(doctor, tmp_path: Path):
    checks = as_json(doctor("-o", "json"), 0)
    default = tmp_path / "home" / "xdg-data" / "statectl" / "blobs"
    assert checks["blob store"] == {"name": "blob store", "status": "ok",
                                    "detail": f"file://{default}: writable, TTL works", "hint": None}
    for name in ("kafka", "checkpoint topic", "coordinator topic"):
        assert checks[name] == {"name": name, "status": "skip", "detail": "no --kafka given", "hint": None}
    assert checks["state dir"] == {"name": "state dir", "status": "skip", "detail": "no --state-dir given",
                                   "hint": None}
    assert_local_checks_ok(checks)


def test_all_ok_on_seaweedfs(doctor, seaweed, s3_url: str, tmp_path: Path):
    env = {"AWS_ACCESS_KEY_ID": seaweed.access_key, "AWS_SECRET_ACCESS_KEY": seaweed.secret_key,
           "STATECTL_S3_ENDPOINT": seaweed.endpoint, "STATECTL_S3_REGION": "us-east-1"}
    checks = as_json(doctor("--blobstore", s3_url, "--state-dir", str(tmp_path), "-o", "json", env=env), 0)
    assert checks["blob store"]["status"] == "ok"
    assert checks["blob store"]["detail"] == f"{s3_url} at {seaweed.endpoint}: credentials accepted, writable, TTL works"
    assert checks["state dir"]["status"] == "ok"
    assert_local_checks_ok(checks)
    bucket, prefix = s3_url[len("s3://"):].split("/", 1)
    left = seaweed.client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    assert left == []


# -- the blob store -----------------------------------------------------------------------------------


def test_wrong_credentials_are_said_to_be_rejected(doctor, seaweed_auth):
    bucket = seaweed_auth.make_bucket()
    env = {"AWS_ACCESS_KEY_ID": seaweed_auth.access_key, "AWS_SECRET_ACCESS_KEY": "wrong-secret",
           "STATECTL_S3_ENDPOINT": seaweed_auth.endpoint, "STATECTL_S3_REGION": "us-east-1", "STATECTL_RETRIES": "1"}
    url = f"s3://{bucket}/doctor-test"
    proc = doctor("--blobstore", url, env=env)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    line = next(line for line in proc.stdout.splitlines() if "blob store" in line)
    assert line.startswith(f"FAIL blob store         {url} at {seaweed_auth.endpoint}: credentials rejected: ")
    assert "SignatureDoesNotMatch" in line
    assert proc.stdout.splitlines()[1].lstrip().startswith("hint: check the access key and secret")
    assert proc.stdout.splitlines()[-1] == "1 of 8 checks failed: blob store"
    assert proc.stderr == "Error: doctor: 1 check failed: blob store\n"

    # The right credentials on the same server: all well.
    env["AWS_SECRET_ACCESS_KEY"] = seaweed_auth.secret_key
    checks = as_json(doctor("--blobstore", url, "-o", "json", env=env), 0)
    assert checks["blob store"]["detail"].endswith("credentials accepted, writable, TTL works")


def test_a_missing_bucket_is_named_and_not_created(doctor, seaweed):
    bucket = f"no-such-bucket-{uuid.uuid4().hex[:8]}"
    env = {"AWS_ACCESS_KEY_ID": seaweed.access_key, "AWS_SECRET_ACCESS_KEY": seaweed.secret_key,
           "STATECTL_S3_ENDPOINT": seaweed.endpoint, "STATECTL_S3_REGION": "us-east-1", "STATECTL_RETRIES": "1"}
    checks = as_json(doctor("--blobstore", f"s3://{bucket}/x", "-o", "json", env=env), 1)
    assert checks["blob store"] == {
        "name": "blob store", "status": "fail", "detail": f"bucket {bucket} does not exist at {seaweed.endpoint}",
        "hint": "create it, or check --blobstore and --s3-endpoint"}
    # SeaweedFS creates a bucket on the first PUT into it: the doctor must not have written anything.
    assert bucket not in {b["Name"] for b in seaweed.client.list_buckets()["Buckets"]}
    assert_local_checks_ok(checks)


@pytest.mark.timeout(60)  # a hang bound (JVM start-up included); how many seconds it takes is for make bench
def test_an_unreachable_endpoint_fails_within_seconds(doctor):
    endpoint = f"http://127.0.0.1:{closed_port()}"
    env = {"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "STATECTL_S3_ENDPOINT": endpoint,
           "STATECTL_S3_REGION": "us-east-1", "STATECTL_RETRIES": "1"}
    checks = as_json(doctor("--blobstore", "s3://some-bucket/x", "-o", "json", env=env), 1)
    check = checks["blob store"]
    assert check["status"] == "fail"
    assert check["detail"].startswith(f"cannot reach endpoint {endpoint}: 127.0.0.1:{endpoint.rsplit(':', 1)[1]}: ")
    assert "refused" in check["detail"].lower()
    assert check["hint"] == "check --s3-endpoint (or s3_endpoint in the profile) and that the store is up"


def test_an_unwritable_file_store_fails_the_blob_store_check(doctor, tmp_path: Path):
    (tmp_path / "afile").write_text("not a dir")
    checks = as_json(doctor("--blobstore", f"file://{tmp_path / 'afile' / 'blobs'}", "-o", "json"), 1)
    check = checks["blob store"]
    assert check["status"] == "fail"
    assert check["detail"] == f"file://{tmp_path / 'afile' / 'blobs'} listing doctor/ failed: blob store " \
                              f"file://{tmp_path / 'afile' / 'blobs'} does not exist"


def test_a_file_store_dir_that_does_not_exist_fails_and_is_not_made(doctor, tmp_path: Path):
    blobs = tmp_path / "typo" / "blobs"
    checks = as_json(doctor("--blobstore", f"file://{blobs}", "-o", "json", make_blobstore=False), 1)
    check = checks["blob store"]
    assert check["status"] == "fail" and check["detail"] == f"file://{blobs} listing doctor/ failed: blob store " \
                                                            f"file://{blobs} does not exist"
    assert "--create" in check["hint"] and not (tmp_path / "typo").exists()


# -- Kafka --------------------------------------------------------------------------------------------


def samza_topics(job: str, job_id: str = "1") -> tuple[str, str]:
    """FORMATS.md, spelled out independently of statectl.formats."""
    j, i = job.replace("_", "-"), job_id.replace("_", "-")
    return f"__samza_checkpoint_ver_1_for_{j}_{i}", f"__samza_coordinator_{j}_{i}"


def test_kafka_brokers_answer_without_a_job(doctor, tansu, tmp_path: Path):
    checks = as_json(doctor("--blobstore", f"file://{tmp_path / 'b'}", "--kafka", tansu.bootstrap, "-o", "json"), 0)
    assert checks["kafka"]["status"] == "ok"
    assert checks["kafka"]["detail"].startswith(f"brokers {tansu.bootstrap} answer (")
    for name in ("checkpoint topic", "coordinator topic"):
        assert checks[name]["status"] == "skip" and checks[name]["detail"] == "no --job given"


def test_missing_job_topics_fail_by_name_then_pass_once_created(doctor, tansu, tmp_path: Path):
    job = f"doctor_job_{uuid.uuid4().hex[:8]}"
    checkpoint, coordinator = samza_topics(job)
    args = ("--blobstore", f"file://{tmp_path / 'b'}", "--kafka", tansu.bootstrap, "--job", job, "-o", "json")

    checks = as_json(doctor(*args), 1)
    assert checks["kafka"]["status"] == "ok"
    assert checks["checkpoint topic"]["status"] == "fail"
    assert checks["checkpoint topic"]["detail"] == f"topic {checkpoint} does not exist on {tansu.bootstrap}"
    assert "--job" in checks["checkpoint topic"]["hint"]
    assert checks["coordinator topic"]["status"] == "fail"
    assert checks["coordinator topic"]["detail"] == f"topic {coordinator} does not exist on {tansu.bootstrap}"
    # Looking never creates them.
    assert not {checkpoint, coordinator} & tansu.topics()

    tansu.create_topic(checkpoint)
    checks = as_json(doctor(*args), 1)
    assert checks["checkpoint topic"] == {"name": "checkpoint topic", "status": "ok",
                                          "detail": f"topic {checkpoint} exists (1 partition)", "hint": None}
    assert checks["coordinator topic"]["status"] == "fail"

    tansu.create_topic(coordinator)
    checks = as_json(doctor(*args), 0)
    assert checks["coordinator topic"] == {"name": "coordinator topic", "status": "ok",
                                           "detail": f"topic {coordinator} exists (1 partition)", "hint": None}


def test_a_job_topic_with_more_than_one_partition_fails(doctor, tansu, tmp_path: Path):
    job, job_id = f"doctor-{uuid.uuid4().hex[:8]}", "prod_2"
    checkpoint, coordinator = samza_topics(job, job_id)
    tansu.create_topic(checkpoint)
    tansu.create_topic(coordinator, partitions=3)
    checks = as_json(doctor("--blobstore", f"file://{tmp_path / 'b'}", "--kafka", tansu.bootstrap, "--job", job,
                            "--job-id", job_id, "-o", "json"), 1)
    assert checks["checkpoint topic"]["status"] == "ok"
    assert checks["coordinator topic"]["status"] == "fail"
    assert checks["coordinator topic"]["detail"] == f"topic {coordinator} has 3 partitions; Samza reads and writes only one"


GROUPER = "org.apache.samza.container.grouper.stream.GroupByPartitionFactory"
READ_VERSIONS = ("the job reads them only with task.checkpoint.read.versions including 2 "
                 "(e.g. task.checkpoint.read.versions=2,1)")


def produce(bootstrap: str, topic: str, *records: tuple[bytes, bytes | None]) -> None:
    """Raw records into partition 0, as a Samza job writes its checkpoints (bytes spelled out here)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for f in [producer.send(topic, key=k, value=v, partition=0) for k, v in records]:
            f.get(timeout=30)
    finally:
        producer.close()


def samza_key(task: str, key_type: str) -> bytes:
    return f'{{"systemstreampartition-grouper-factory":"{GROUPER}","taskName":"{task}","type":"{key_type}"}}'.encode()


SAMZA_V1 = (b'{"SystemStreamPartition [kafka, PageViews, 0]":{"system":"kafka","partition":"0","offset":"42",'
            b'"stream":"PageViews"}}')


def test_a_checkpoint_topic_with_only_statectls_v2_checkpoints_says_how_the_job_reads_them(doctor, tansu,
                                                                                             tmp_path: Path):
    from statectl.catalog.kafka_log import KafkaCheckpointLog
    from statectl.catalog.refs import StoreRef

    job = f"doctor-v2-{uuid.uuid4().hex[:8]}"
    checkpoint, coordinator = samza_topics(job)
    tansu.create_topic(coordinator)
    # What 'statectl backup --kafka' leaves in a topic no job has written to yet: one v2 record.
    with KafkaCheckpointLog(tansu.bootstrap, job, "1") as log:
        log.commit(StoreRef(job, "1", "Partition 0", "counts"), "1700000000000-1", "blob-1")
    args = ("--blobstore", f"file://{tmp_path / 'b'}", "--kafka", tansu.bootstrap, "--job", job)

    checks = as_json(doctor(*args, "-o", "json"), 0)  # a note, not a failure
    assert checks["checkpoint topic"] == {
        "name": "checkpoint topic", "status": "ok",
        "detail": f"topic {checkpoint} exists (1 partition); it holds only v2 checkpoints (1 task): {READ_VERSIONS}",
        "hint": "add task.checkpoint.read.versions=2,1 to the job's config: with Samza's default (1) the job sees "
                "no checkpoint for a task that has only v2 checkpoints"}
    proc = doctor(*args)
    assert proc.returncode == 0 and proc.stderr == "", (proc.stdout, proc.stderr)
    assert f"ok   checkpoint topic   topic {checkpoint} exists (1 partition); it holds only v2 checkpoints (1 task): " \
           f"{READ_VERSIONS}" in proc.stdout.splitlines()

    # Another task with a v1 checkpoint of the job's own: the task with v2 only is still named.
    produce(tansu.bootstrap, checkpoint, (samza_key("Partition 1", "checkpoint"), SAMZA_V1))
    checks = as_json(doctor(*args, "-o", "json"), 0)
    assert checks["checkpoint topic"]["status"] == "ok"
    assert checks["checkpoint topic"]["detail"] == (f"topic {checkpoint} exists (1 partition); 1 of 2 tasks have only "
                                                    f"v2 checkpoints ('Partition 0'): {READ_VERSIONS}")

    # Once every task with a v2 checkpoint also has a v1 one, a job with the default reads them all: no note.
    produce(tansu.bootstrap, checkpoint, (samza_key("Partition 0", "checkpoint"), SAMZA_V1))
    checks = as_json(doctor(*args, "-o", "json"), 0)
    assert checks["checkpoint topic"] == {"name": "checkpoint topic", "status": "ok",
                                          "detail": f"topic {checkpoint} exists (1 partition)", "hint": None}


def test_v1_checkpoints_deleted_by_a_tombstone_do_not_count(doctor, tansu, tmp_path: Path):
    job = f"doctor-v2-{uuid.uuid4().hex[:8]}"
    checkpoint, coordinator = samza_topics(job)
    tansu.create_topic(checkpoint)
    tansu.create_topic(coordinator)
    v2 = (b'{"checkpoint-id":"1700000000000-1","input-offsets":{},"state-checkpoint-markers":{},"version":2}')
    produce(tansu.bootstrap, checkpoint, (samza_key("Partition 0", "checkpoint"), SAMZA_V1),
            (samza_key("Partition 0", "checkpoint-v2"), v2), (b"not a checkpoint key", b"x"),
            (samza_key("Partition 0", "checkpoint"), None))
    checks = as_json(doctor("--blobstore", f"file://{tmp_path / 'b'}", "--kafka", tansu.bootstrap, "--job", job,
                            "-o", "json"), 0)
    assert checks["checkpoint topic"]["detail"] == (f"topic {checkpoint} exists (1 partition); it holds only v2 "
                                                    f"checkpoints (1 task): {READ_VERSIONS}")


def test_a_checkpoint_topic_with_only_v1_checkpoints_needs_no_note(doctor, tansu, tmp_path: Path):
    job = f"doctor-v1-{uuid.uuid4().hex[:8]}"
    checkpoint, coordinator = samza_topics(job)
    tansu.create_topic(checkpoint)
    tansu.create_topic(coordinator)
    produce(tansu.bootstrap, checkpoint, (samza_key("Partition 0", "checkpoint"), SAMZA_V1))
    checks = as_json(doctor("--blobstore", f"file://{tmp_path / 'b'}", "--kafka", tansu.bootstrap, "--job", job,
                            "-o", "json"), 0)
    assert checks["checkpoint topic"] == {"name": "checkpoint topic", "status": "ok",
                                          "detail": f"topic {checkpoint} exists (1 partition)", "hint": None}


@pytest.mark.timeout(60)
def test_unreachable_brokers_fail_and_the_topics_are_not_checked(doctor, tmp_path: Path):
    bootstrap = f"127.0.0.1:{closed_port()}"
    checks = as_json(doctor("--blobstore", f"file://{tmp_path / 'b'}", "--kafka", bootstrap, "--job", "pv",
                            "--timeout", "2", "-o", "json"), 1)
    assert checks["kafka"]["status"] == "fail"
    assert checks["kafka"]["detail"].startswith(f"cannot reach Kafka brokers {bootstrap}: ")
    for name in ("checkpoint topic", "coordinator topic"):
        assert checks[name] == {"name": name, "status": "skip", "detail": "not checked: the brokers did not answer",
                                "hint": None}
    assert checks["blob store"]["status"] == "ok"


# -- the state dir, Java, usage -----------------------------------------------------------------------


def test_a_state_dir_that_cannot_be_created_fails(doctor, tmp_path: Path):
    # Root ignores permission bits, so the dir is made impossible instead: its parent is a regular file.
    (tmp_path / "afile").write_text("x")
    state = tmp_path / "afile" / "state"
    proc = doctor("--blobstore", f"file://{tmp_path / 'b'}", "--state-dir", str(state))
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    lines = proc.stdout.splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith("FAIL state dir"))
    assert lines[i] == (f"FAIL state dir          {state} does not exist and cannot be created: "
                        f"{tmp_path / 'afile'} is not a directory")
    assert lines[i + 1] == "                        hint: pass the job's state base dir as --state-dir"
    assert lines[-1] == "1 of 8 checks failed: state dir"
    assert proc.stderr == "Error: doctor: 1 check failed: state dir\n"


def test_a_state_dir_that_is_a_file_fails(doctor, tmp_path: Path):
    (tmp_path / "afile").write_text("x")
    checks = as_json(doctor("--blobstore", f"file://{tmp_path / 'b'}", "--state-dir", str(tmp_path / "afile"),
                            "-o", "json"), 1)
    assert checks["state dir"]["detail"] == f"{tmp_path / 'afile'} is not a directory"


def test_a_state_dir_that_takes_no_files_fails(doctor, tmp_path: Path):
    # chmod 0o500 does not stop root; sysfs refuses new files to everyone (EACCES, or EROFS mounted read-only).
    checks = as_json(doctor("--blobstore", f"file://{tmp_path / 'b'}", "--state-dir", "/sys", "-o", "json"), 1)
    assert checks["state dir"]["status"] == "fail"
    assert checks["state dir"]["detail"] in ("/sys is not writable: Permission denied",
                                             "/sys is not writable: Read-only file system")
    assert checks["state dir"]["hint"] == "run statectl as the job's user, or fix the dir's owner and permissions"


def test_without_java_the_java_check_is_skipped_unless_pyspark_needs_it(doctor, tmp_path: Path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    checks = as_json(doctor("--blobstore", f"file://{tmp_path / 'b'}", "-o", "json", env={"PATH": str(empty)}),
                     1 if PYSPARK else 0)
    if PYSPARK:
        assert checks["java"]["status"] == "fail" and checks["spark"]["status"] == "fail"
    else:
        assert checks["java"]["status"] == "skip"
        assert checks["java"]["detail"] == "no java on PATH (only the Spark jobs need it)"
        assert checks["java"]["hint"].startswith("install a JDK 17")


@pytest.mark.parametrize("args, message", [
    (("--blobstore", "ftp://host/x"), "Error: unsupported blob store scheme 'ftp'"),
    (("--timeout", "0"), "Error: --timeout must be more than 0 seconds"),
    (("--kafka", "127.0.0.1:9", "--job", "page views"), "Error: job 'page views' (id '1') gives checkpoint topic"),
])
def test_bad_flags_are_usage_errors(doctor, args, message):
    proc = doctor(*args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == ""
    assert proc.stderr.startswith(message), proc.stderr


def test_a_bad_config_file_is_a_usage_error(doctor, tmp_path: Path):
    config = tmp_path / "statectl.toml"
    config.write_text('[default]\nretries = "many"\n')
    proc = doctor("--config", str(config))
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stderr.startswith(f"Error: {config}: [default] key 'retries'")


def test_a_batch_applications_checkpoint_topic_is_the_one_with_its_run_id(doctor, tansu, tmp_path: Path):
    """KafkaUtil.getCheckpointTopic: app.mode=BATCH with an app.run.id suffixes the topic with the run id."""
    from statectl.kafka.coordinator import CoordinatorStream

    job = f"doctor_batch_{uuid.uuid4().hex[:8]}"
    checkpoint, _ = samza_topics(job)
    with CoordinatorStream(tansu.bootstrap, job, "1") as cs:
        cs.create()
        cs.write_config({"job.name": job, "app.mode": "BATCH", "app.run.id": "r-42"})
    tansu.create_topic(checkpoint)  # the STREAM-mode name: not this job's
    args = ("--blobstore", f"file://{tmp_path / 'b'}", "--kafka", tansu.bootstrap, "--job", job, "-o", "json")
    checks = as_json(doctor(*args), 1)
    assert checks["checkpoint topic"]["detail"] == f"topic {checkpoint}-r-42 does not exist on {tansu.bootstrap}"
    tansu.create_topic(f"{checkpoint}-r-42")
    checks = as_json(doctor(*args), 0)
    assert checks["checkpoint topic"]["detail"] == f"topic {checkpoint}-r-42 exists (1 partition)"
