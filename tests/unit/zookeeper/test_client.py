"""statectl.zookeeper.client: the connect string (ZooKeeper's ConnectStringParser, Samza's zk.connect)."""

from __future__ import annotations

import pytest

from statectl.zookeeper.client import check_connect
from statectl.zookeeper.jobmodel import coordination_roots


@pytest.mark.parametrize("value", ["zk:2181", "zk1:2181,zk2:2182/samza", "[::1]:2181/a/b", "zk", "10.0.0.1:1/x-y_z.1"])
def test_good_connect_strings(value: str):
    assert check_connect(f" {value} ") == value


@pytest.mark.parametrize("value, why", [
    ("", "expected host:port"), ("/samza", "expected host:port"), ("zk:0", "between 1 and 65535"),
    ("zk:65536", "between 1 and 65535"), ("zk:port", "not host:port"), ("zk1:2181,,zk2:2181", "not host:port"),
    ("zk 1:2181", "not host:port"), ("zk:2181/samza/", "chroot"), ("zk:2181/a//b", "chroot"),
])
def test_bad_connect_strings(value: str, why: str):
    with pytest.raises(ValueError, match=why):
        check_connect(value)


def test_the_job_root_follows_samzas_app_and_job_names():
    assert coordination_roots("pv", "1") == ["/app-pv-1/pv-1-2.0-coordinationData", "/app-pv-1/pv-1-1.0-coordinationData"]
    config = {"job.name": "pv", "job.id": "2", "app.name": "site", "app.id": "7"}
    assert coordination_roots("pv", "2", config)[0] == "/app-site-7/pv-2-2.0-coordinationData"
    assert coordination_roots("pv", "2", {"job.name": "pv", "job.id": "2"})[0] == "/app-pv-2/pv-2-2.0-coordinationData"
