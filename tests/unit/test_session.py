"""statectl.session: settings -> adapters, for the CLI and for Python callers that embed statectl."""

from __future__ import annotations

from pathlib import Path

import pytest

from statectl.errors import ConfigError, UsageError
from statectl.local.layout import store_dir
from statectl.progress import NoteRecorder, NullProgress
from statectl.session import Session, open_session, resolve_settings
from tests.tools.genstore import fingerprint, make_store


@pytest.fixture
def env(tmp_path: Path, monkeypatch) -> dict[str, str]:
    """An environment with no STATECTL_* and no config file: only what a test passes counts."""
    monkeypatch.chdir(tmp_path)
    return {"XDG_CONFIG_HOME": str(tmp_path / "xdg-config"), "HOME": str(tmp_path)}


def test_a_library_backs_up_and_restores_through_a_session(tmp_path: Path, env):
    from statectl.engine.backup import BackupOptions, backup
    from statectl.engine.restore import RestoreOptions, restore

    state = tmp_path / "state"
    live = store_dir(state, "counts", "Partition 0")
    make_store(live, 500, 256, seed=3, sst_mb=1)
    blobs = tmp_path / "blobs"
    with open_session(blobstore=f"file://{blobs}", job="page-views", store="counts", state_dir=state,
                      env=env, create_blobstore=True) as session:
        s = session.settings
        assert session.store_dir() == live and str(session.ref()) == "page-views-1/Partition 0/counts"
        b = backup(BackupOptions(ref=session.ref(), store_dir=session.store_dir(), parallelism=s.parallelism,
                                 chunk_size=s.chunk_size, ttl_seconds=s.ttl, keep_last=s.keep_last),
                   session.blobstore, session.catalog, session.progress)
        assert b.files_uploaded == b.files_total > 0
        target = tmp_path / "copy"
        r = restore(RestoreOptions(ref=session.ref(), store_dir=target, target_dir=target,
                                   parallelism=s.parallelism), session.blobstore, session.catalog, session.progress)
        assert r.snapshot_id == b.snapshot_id
    assert fingerprint(target) == fingerprint(live)
    assert any(blobs.rglob("*")), "the backup went to the file:// store the session named"


def test_settings_resolve_like_the_cli(tmp_path: Path, env):
    (tmp_path / "statectl.toml").write_text('[default]\njob = "from-profile"\nparallelism = 4\n'
                                            '[other]\njob = "other-profile"\n')
    session = Session.from_env(env={**env, "STATECTL_STORE": "from-env"})
    s = session.settings
    assert (s.job, s.store, s.parallelism, s.task) == ("from-profile", "from-env", 4, "Partition 0")
    assert s.source("job").startswith("profile default") and s.source("store") == "env STATECTL_STORE"
    assert s.source("task") == "default"
    s = Session.from_env(env={**env, "STATECTL_STORE": "from-env"}, store="from-arg", profile="other").settings
    assert (s.job, s.store, s.source("store")) == ("other-profile", "from-arg", "flag")
    with pytest.raises(ConfigError):
        Session.from_env(env=env, profile="missing")


def test_paths_are_accepted_and_unknown_settings_refused(tmp_path: Path, env):
    s = resolve_settings({"state_dir": tmp_path / "state", "blobstore": None}, env=env)
    assert s.state_dir == str(tmp_path / "state")
    with pytest.raises(UsageError, match="unknown setting 'blob_store'") as e:
        open_session(blob_store="file:///x", env=env)
    assert "blobstore" in (e.value.hint or "")


def test_ref_and_store_dir_say_what_is_missing(tmp_path: Path, env):
    session = Session.from_env(env=env, blobstore=f"file://{tmp_path / 'b'}")
    with pytest.raises(UsageError, match="no job given"):
        session.ref()
    session = Session.from_env(env=env, blobstore=f"file://{tmp_path / 'b'}", job="j")
    with pytest.raises(UsageError, match="no store given"):
        session.ref()
    assert session.ref(need_store=False).store == "*"
    with pytest.raises(UsageError, match="no store dir given"):
        session.store_dir()
    assert session.store_dir(tmp_path / "explicit") == tmp_path / "explicit"
    assert session.store_dir(str(tmp_path / "explicit")) == tmp_path / "explicit"


def test_adapters_open_on_use_and_close_once(tmp_path: Path, env):
    session = Session.from_env(env=env, blobstore=f"file://{tmp_path / 'b'}", create_blobstore=True)
    assert isinstance(session.progress, NullProgress)
    assert session._blobstore is None and session.commit_log is None    # nothing opened yet; no Kafka
    closed = []
    store = session.blobstore
    assert session.blobstore is store and session.catalog.blobstore is store
    assert session.catalog.commit_log is None
    real_close = store.close
    store.close = lambda: (closed.append(True), real_close())  # type: ignore[method-assign]
    with session:
        pass
    session.close()
    assert closed == [True]
    assert session._blobstore is None and session._catalog is None


def test_kafka_makes_the_checkpoint_topics_the_commit_log_without_connecting(tmp_path: Path, env):
    from statectl.catalog.kafka_log import KafkaCheckpointLogs

    recorder = NoteRecorder()
    (tmp_path / "b").mkdir()
    with open_session(env=env, blobstore=f"file://{tmp_path / 'b'}", kafka="127.0.0.1:1", progress=recorder) as s:
        assert s.progress is recorder
        assert isinstance(s.commit_log, KafkaCheckpointLogs) and s.commit_log.bootstrap == "127.0.0.1:1"
        assert s.catalog.commit_log is s.commit_log
        assert s.kafka_security is None                                   # PLAINTEXT


def test_secrets_of_the_settings_are_masked(tmp_path: Path, env):
    from statectl.redact import redact

    Session.from_env(env={**env, "STATECTL_S3_SECRET_ACCESS_KEY": "s3cr3t-Value-42"},
                     blobstore=f"file://{tmp_path / 'b'}", s3_endpoint="http://user:pa55word@127.0.0.1:1")
    assert redact("key s3cr3t-Value-42 and pa55word") == "key **** and ****"


def test_a_file_blob_store_dir_that_does_not_exist_is_not_found_unless_created(tmp_path: Path, env, monkeypatch):
    """A mistyped file:// URL must not start a new blob store where nobody looks (issue 22): exit 10, and
    nothing is made; create_blobstore (the CLI's --create) makes it; the embedded default is always made."""
    from statectl.errors import NotFoundError

    missing = tmp_path / "no" / "such" / "blobs"
    with Session.from_env(env=env, blobstore=f"file://{missing}") as session:
        store = session.blobstore  # opening touches nothing; the first use says it
        with pytest.raises(NotFoundError, match=f"blob store file://{missing} does not exist") as e:
            list(store.list(""))
        with pytest.raises(NotFoundError, match="does not exist"):
            store.put_at("checkpoints/x", b"1")
        assert e.value.exit_code == 10 and "--create" in (e.value.hint or "")
    assert not (tmp_path / "no").exists()
    (tmp_path / "afile").write_text("x")
    with Session.from_env(env=env, blobstore=f"file://{tmp_path / 'afile'}") as session:
        with pytest.raises(NotFoundError, match="is not a directory"):
            session.blobstore.stat("blobs/x")
    with Session.from_env(env=env, blobstore=f"file://{missing}", create_blobstore=True) as session:
        assert session.blobstore.url == f"file://{missing}" and missing.is_dir()
    default = tmp_path / "xdg-data"
    monkeypatch.setenv("XDG_DATA_HOME", str(default))  # the default URL is read from the process environment
    with Session.from_env(env=env) as session:
        assert session.settings.source("blobstore") == "default"
        session.blobstore
    assert (default / "statectl" / "blobs").is_dir()


def test_the_embedded_default_named_by_another_spelling_is_made_too(tmp_path: Path, env, monkeypatch):
    """--blobstore naming the default dir in another way (a trailing slash, ``/./``) is the default all the
    same: it is made on first use, as the default is."""
    default = tmp_path / "xdg-data"
    monkeypatch.setenv("XDG_DATA_HOME", str(default))
    with Session.from_env(env=env, blobstore=f"file://{default}/./statectl/blobs/") as session:
        assert session.settings.source("blobstore") != "default"
        session.blobstore
    assert (default / "statectl" / "blobs").is_dir()


def test_one_rate_limit_per_session(env):
    """Every transfer of a command run takes from the same bucket: the session makes it once."""
    session = Session.from_env(env=env, limit_rate="20MiB/s")
    bucket = session.rate_limit
    assert bucket is not None and bucket.rate == 20 * 1024 * 1024
    assert session.rate_limit is bucket
    assert Session.from_env(env=env, limit_rate="20MiB/s").rate_limit is not bucket
    assert Session.from_env(env=env).rate_limit is None
    assert Session.from_env(env={**env, "STATECTL_LIMIT_RATE": "1G/s"}).rate_limit.rate == 1024 ** 3
    with pytest.raises(UsageError, match="--limit-rate: invalid value '0'"):
        Session.from_env(env=env, limit_rate="0")
