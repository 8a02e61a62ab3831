"""Fixtures shared by the whole test tree.

Servers (tests/servers.py) start once per session, only when a test asks for them, and a server that
cannot start fails the tests that need it: a required integration suite never skips silently.
"""

from __future__ import annotations

import os
import uuid
from typing import Iterator

import pytest

from statectl.blobstore import BlobStore, S3Options, open_blobstore

from tests.servers import SeaweedServer, ServerStartError, TansuServer, ZooKeeperServer

# Small, so that tests exercise multipart uploads with blobs of a few MiB (S3's minimum part size).
TEST_PART_SIZE = 5 * 1024 * 1024


# The tests that start a Spark JVM (spark-submit, or a local session in the test), by node id prefix (whole
# files, or single tests; a key-group rescale runs no Spark job unless its sources reach into each other),
# in two chains of about the same length. Under pytest-xdist each chain runs on
# one worker, one JVM after another (more Spark JVMs at once on 2 cores starve each other), and both
# start first: they are the longest. See pytest_xdist_make_scheduler.
# A chain runs its tests in the order of its prefixes, then in collection order. Each starts with a build
# of the JVM path (Spark SQL, Parquet, CSV, Arrow): on a machine without the drivers' class archive
# (statectl.spark.launch.ClassArchive; CI's) the first build records it, and every later JVM maps only
# the classes that build loaded. Recorded by a rescale's driver (the RDD path), it held 70 MB of classes
# instead of 180, and each adstore build then spent about 2 s more CPU loading the rest from the jars.
# The class archive's own test comes first: its build (test_spark_build's class_archive) records one anyway,
# and hands it to the machine's cache when there is none, so that no other build records one (a recording
# costs about 30 s of CPU).
SPARK_CHAINS = {
    "spark-builds": (
        "tests/integration/test_spark_build.py::test_the_class_archive_is_recorded_",
        "tests/integration/test_spark_build.py::",
        "tests/integration/test_rescale_keygroups.py::test_sources_reaching_into_each_others_key_groups_",
        "tests/integration/test_file_owners.py::test_rescale_as_root_",
    ),
    "spark-loads-and-rescales": (
        "tests/integration/test_adstore_spark.py::test_plain_columns_take_the_jvm_path_and_equal_the_put_path[",
        "tests/integration/test_adstore_spark.py::",
        "tests/integration/test_rescale.py::",
        "tests/integration/test_rescale_rerun.py::test_killed_in_its_commit_",
        "tests/integration/test_rescale_rerun.py::test_a_key_outside_its_task_",
        "tests/integration/test_hostile_adstore.py::test_a_file_changed_during_the_spark_build_",
    ),
}


# The longest tests besides the chains (each 40-140 s on a loaded 2-core machine), by node id prefix, handed
# out right after the chains, longest first: started last, one of them would be the run's tail, every other
# worker idle. The rest go in collection order, the unit tests (short) last.
LONG_FIRST = (
    "tests/integration/test_rescale_rerun.py::test_key_groups_cut_",
    "tests/integration/test_rescale_keygroups.py::test_on_s3_no_source_file_is_downloaded",
    "tests/integration/test_adstore_topic.py::test_resume_after_sigkill_at_random_moments",
    "tests/integration/test_eos_pipeline.py::",
    "tests/integration/test_rescale_keygroups.py::test_scale_out_and_back_",
    "tests/integration/test_crash.py::",
    "tests/integration/test_drain_pipeline.py::",
    "tests/unit/snapshot/test_properties.py::",
    "tests/integration/test_rescale_keygroups.py::",
    "tests/integration/test_hostile_promote.py::test_every_refusal_of_",
    "tests/integration/test_readonly.py::",
    "tests/integration/test_rescale_rerun.py::",
)


def pytest_configure(config: pytest.Config) -> None:
    # The Spark JVMs of the tests (spark-submit's driver: in local mode, the whole application) compile with
    # C1 only: a test's build runs for seconds, and C2's compiler threads cost more CPU than they save
    # (a build's CPU time drops by about 40 %). They collect with the serial collector: a heap of a few
    # hundred MB lives seconds, and G1's concurrent and parallel threads cost a tenth of the JVM's CPU more.
    # The same classes, the same results; users keep the JVM's defaults. Set SPARK_SUBMIT_OPTS yourself to
    # test with others.
    os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``-n N`` (make test): xdist's load scheduling, test by test, except the SPARK_CHAINS: each is one
    unit of work, handed out first, so one worker runs it all; then the LONG_FIRST tests, then the rest.
    (Groups by ``xdist_group`` marks, --dist loadgroup, do not work with pytest 9.2: xdist 3.8 writes the
    group into a node id field that pytest no longer reads.)"""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    def rank(scope: str) -> int:
        if scope in SPARK_CHAINS:
            return -1
        return next((i for i, prefix in enumerate(LONG_FIRST) if scope.startswith(prefix)), len(LONG_FIRST))

    def chain_order(scope: str, tests: dict) -> dict:
        """A chain's tests in the order of its prefixes (stable: then collection order); others as they are."""
        if scope not in SPARK_CHAINS:
            return tests
        prefixes = SPARK_CHAINS[scope]
        first = lambda nodeid: next(i for i, p in enumerate(prefixes) if nodeid.startswith(p))  # noqa: E731
        return dict(sorted(tests.items(), key=lambda test: first(test[0])))

    class SparkChains(LoadScopeScheduling):
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            return next((name for name, tests in SPARK_CHAINS.items() if nodeid.startswith(tests)), nodeid)

        def _assign_work_unit(self, node) -> None:
            if not self.ordered:  # the queue is complete on the first call (xdist's schedule())
                self.ordered = True
                units = sorted(self.workqueue.items(), key=lambda unit: rank(unit[0]))  # stable: collection order
                self.workqueue.clear()
                self.workqueue.update((scope, chain_order(scope, tests)) for scope, tests in units)
            super()._assign_work_unit(node)

    return SparkChains(config, log)


def _start(server: SeaweedServer) -> SeaweedServer:
    try:
        return server.start()
    except ServerStartError as e:
        pytest.fail(f"SeaweedFS did not start: {e}", pytrace=False)


@pytest.fixture(scope="session")
def seaweed() -> Iterator[SeaweedServer]:
    """One SeaweedFS S3 server for the session; any credentials are accepted."""
    server = _start(SeaweedServer())
    yield server
    server.stop()


@pytest.fixture(scope="session")
def seaweed_auth() -> Iterator[SeaweedServer]:
    """A second SeaweedFS S3 server that accepts only the credentials AK / SK."""
    server = _start(SeaweedServer(enforce_auth=True, access_key="AK", secret_key="SK"))
    yield server
    server.stop()


@pytest.fixture
def s3_url(seaweed: SeaweedServer) -> str:
    """``s3://<fresh bucket>/<prefix>`` on the session's server: every test starts empty."""
    bucket = seaweed.make_bucket()
    return f"s3://{bucket}/statectl-test/{uuid.uuid4().hex[:8]}"


@pytest.fixture
def s3_options(seaweed: SeaweedServer) -> S3Options:
    """Connection settings for the session's server, with a small part size."""
    return S3Options(endpoint_url=seaweed.endpoint, region="us-east-1", access_key_id=seaweed.access_key,
                     secret_access_key=seaweed.secret_key, part_size=TEST_PART_SIZE, max_connections=8)


@pytest.fixture(params=["file", "s3"])
def blobstore(request: pytest.FixtureRequest, tmp_path) -> Iterator[BlobStore]:
    """An opened, empty blob store of every backend in turn (``-k file`` / ``-k s3`` pick one).

    The S3 server is only started when the s3 variant runs.
    """
    if request.param == "file":
        store = open_blobstore(f"file://{tmp_path / 'blobs'}")
    else:
        store = open_blobstore(request.getfixturevalue("s3_url"), s3=request.getfixturevalue("s3_options"))
    yield store
    store.close()


# -- S3 behind a fault-injecting proxy (tests/faultproxy.py) ------------------------------------------

# The fault proxies' seed; set STATECTL_TEST_FAULT_SEED to soak the fault tests with other sequences.
FAULT_SEED = int(os.environ.get("STATECTL_TEST_FAULT_SEED", "20260601"))


class FaultyS3:
    """A fresh bucket on the session's SeaweedFS, reached through a FaultProxy of its own.

    ``url`` and ``options`` go through the proxy; ``direct_options`` and ``open_direct()`` bypass it, to
    set up or inspect a store without faults. ``proxy.set_rate(0.05)``, ``proxy.set_down(True)`` and
    ``proxy.stats()`` drive and read the faults. Blob stores opened here are closed with the fixture.
    """

    def __init__(self, seaweed: SeaweedServer, proxy, bucket: str, prefix: str):
        from tests.faultproxy import FaultProxy

        self.seaweed = seaweed
        self.proxy: FaultProxy = proxy
        self.bucket = bucket
        self.url = f"s3://{bucket}/{prefix}"
        self.options = S3Options(endpoint_url=proxy.url, region="us-east-1", access_key_id=seaweed.access_key,
                                 secret_access_key=seaweed.secret_key, part_size=TEST_PART_SIZE, max_connections=8)
        self.direct_options = S3Options(endpoint_url=seaweed.endpoint, region="us-east-1",
                                        access_key_id=seaweed.access_key, secret_access_key=seaweed.secret_key,
                                        part_size=TEST_PART_SIZE, max_connections=8)
        self._opened: list[BlobStore] = []

    def open(self, *, retries: int = 8) -> BlobStore:
        """``open_blobstore(url)`` through the proxy, retrying transient errors ``retries`` times."""
        store = open_blobstore(self.url, s3=self.options, retries=retries)
        self._opened.append(store)
        return store

    def open_direct(self) -> BlobStore:
        """The same store straight on SeaweedFS: no faults, not counted by the proxy."""
        store = open_blobstore(self.url, s3=self.direct_options, retries=0)
        self._opened.append(store)
        return store

    def cli_env(self, home, *, retries: int = 1) -> dict[str, str]:
        """A clean environment for running ``statectl`` as a subprocess against the proxy: only PATH, a
        HOME and XDG dirs under ``home``, the S3 credentials, endpoint and region, and STATECTL_RETRIES."""
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
            "XDG_DATA_HOME": str(home / "xdg-data"), "XDG_CONFIG_HOME": str(home / "xdg-config"),
            "AWS_ACCESS_KEY_ID": self.seaweed.access_key, "AWS_SECRET_ACCESS_KEY": self.seaweed.secret_key,
            "AWS_EC2_METADATA_DISABLED": "true", "STATECTL_S3_ENDPOINT": self.proxy.url,
            "STATECTL_S3_REGION": "us-east-1", "STATECTL_RETRIES": str(retries),
        }

    def close(self) -> None:
        for store in self._opened:
            store.close()
        self._opened.clear()
        self.proxy.close()


@pytest.fixture
def faulty_s3(seaweed: SeaweedServer, request: pytest.FixtureRequest) -> Iterator[FaultyS3]:
    """A fresh bucket behind its own fault-injecting proxy (seeded; no faults until ``proxy.set_rate``).

    The bucket is made directly on SeaweedFS, so setup never meets a fault. Parametrize indirectly
    to start with faults on: ``@pytest.mark.parametrize("faulty_s3", [0.05], indirect=True)``.
    """
    from tests.faultproxy import FaultProxy

    bucket = seaweed.make_bucket()
    proxy = FaultProxy(seaweed.endpoint, rate=getattr(request, "param", 0.0), seed=FAULT_SEED).start()
    faulty = FaultyS3(seaweed, proxy, bucket, f"statectl-test/{uuid.uuid4().hex[:8]}")
    yield faulty
    faulty.close()


# -- Kafka protocol: Tansu (tests/servers.py) --------------------------------------------------------------


@pytest.fixture(scope="session")
def tansu() -> Iterator[TansuServer]:
    """One memory-only Tansu Kafka broker for the session; tests use topics and job names of their own."""
    try:
        server = TansuServer().start()
    except ServerStartError as e:
        pytest.fail(f"Tansu did not start: {e}", pytrace=False)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def tansu_other() -> Iterator[TansuServer]:
    """A second Tansu broker: another Kafka cluster, for a job whose systems are on several clusters."""
    try:
        server = TansuServer().start()
    except ServerStartError as e:
        pytest.fail(f"Tansu did not start: {e}", pytrace=False)
    yield server
    server.stop()


# -- ZooKeeper: Debian's zookeeper package (tests/servers.py) --------------------------------------------------


@pytest.fixture(scope="session")
def zookeeper() -> Iterator[ZooKeeperServer]:
    """One standalone ZooKeeper server for the session, on loopback; tests use znodes (chroots) of their own."""
    try:
        server = ZooKeeperServer().start()
    except ServerStartError as e:
        pytest.fail(f"ZooKeeper did not start: {e}", pytrace=False)
    yield server
    server.stop()


@pytest.fixture
def small_disk(tmp_path) -> Iterator:
    """``small_disk(mib)``: a dir on a tmpfs of that many MiB, mounted for the test (a real full disk: the
    writes of RocksDB and of statectl fail with ENOSPC); unmounted at the end. Needs root; a mount that
    fails as root fails the test."""
    import subprocess

    mounted: list[str] = []

    def make(mib: int = 2):
        if os.geteuid() != 0:
            pytest.skip("a real full disk needs root to mount a tmpfs (the failpoint tests cover the rest)")
        d = tmp_path / f"small-disk-{len(mounted)}"
        d.mkdir()
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mib}m", "tmpfs", str(d)], capture_output=True,
                           text=True)
        if p.returncode != 0:
            pytest.fail(f"cannot mount a {mib} MiB tmpfs at {d}: {p.stderr.strip()}")
        mounted.append(str(d))
        return d

    yield make
    for d in mounted:
        subprocess.run(["umount", "--lazy", d], check=False)


@pytest.fixture
def cli(tmp_path, monkeypatch):
    """Run statectl in-process (typer's CliRunner) with a clean environment rooted in tmp_path: no STATECTL_*
    variable, XDG dirs and the working dir under tmp_path. ``cli(*args, code=0, env=None)`` asserts the exit
    code and returns the result (stdout and stderr apart)."""
    from typer.testing import CliRunner

    from statectl.cli.main import app

    from tests.tools.standby_helpers import isolate_cli

    isolate_cli(tmp_path, monkeypatch)
    runner = CliRunner()

    def run(*args: str, code: int = 0, env: dict | None = None):
        result = runner.invoke(app, list(args), env=env)
        assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
        return result

    return run
