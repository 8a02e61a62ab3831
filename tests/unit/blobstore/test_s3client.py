"""statectl.blobstore.s3client: the clients of one process share botocore's data loader (the service
models parsed once), unless AWS_DATA_PATH asks a session for models of its own. Real botocore; no request
is sent."""

from __future__ import annotations

import pytest

from statectl.blobstore import S3Options
from statectl.blobstore.s3client import new_client

OPTIONS = S3Options(endpoint_url="http://127.0.0.1:9", region="us-east-1", access_key_id="AK", secret_access_key="SK")


def test_every_client_of_the_process_uses_the_same_service_models(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("AWS_DATA_PATH", raising=False)
    a, b = new_client(OPTIONS), new_client(OPTIONS)
    assert a is not b
    # the parsed S3 model is the very same object: loaded once, not parsed again for the second client
    assert a.meta.service_model._service_description is b.meta.service_model._service_description


def test_a_data_path_of_its_own_gets_models_of_its_own(monkeypatch: pytest.MonkeyPatch, tmp_path):
    monkeypatch.delenv("AWS_DATA_PATH", raising=False)
    shared = new_client(OPTIONS)
    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))
    own = new_client(OPTIONS)
    assert own.meta.service_model._service_description is not shared.meta.service_model._service_description


def test_the_first_client_leaves_botocores_models_out_of_the_collectors_walks():
    # A fresh process: the first client's objects are frozen once, the collector is on again, a second
    # client freezes nothing more.
    import subprocess
    import sys

    code = ("import gc; from statectl.blobstore import S3Options; from statectl.blobstore.s3client import new_client\n"
            "o = S3Options(endpoint_url='http://127.0.0.1:9', region='us-east-1', access_key_id='AK', "
            "secret_access_key='SK')\n"
            "new_client(o); first = gc.get_freeze_count(); new_client(o)\n"
            "print(first, gc.get_freeze_count(), gc.isenabled())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    first, second, enabled = out.split()
    assert int(first) > 50_000 and int(second) == int(first) and enabled == "True", out
