"""Fixtures shared by the whole test tree.

Servers (tests/servers.py) start once per session, only when a test asks for them, and a server that
cannot start fails the tests that need it: a required integration suite never skips silently.
"""

from __future__ import annotations

import uuid
from typing import Iterator

import pytest

from statectl.blobstore import BlobStore, S3Options, open_blobstore

from tests.servers import SeaweedServer, ServerStartError

# Small, so that tests exercise multipart uploads with blobs of a few MiB (S3's minimum part size).
TEST_PART_SIZE = 5 * 1024 * 1024


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
