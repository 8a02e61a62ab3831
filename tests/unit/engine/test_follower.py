"""engine.follower: the settings a follower records are checked when read, and what a failed promote starts
from them is statectl itself with those values as values, never a command read from the file. The restart
itself runs against real processes in tests/integration/test_hostile_promote.py."""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import asdict

import pytest

from statectl.engine.standby.follower import FollowerSettings

GOOD = FollowerSettings("broker:9092", "page-views", "1", state_dir="/var/samza/state", task="Partition 0",
                        store="counts", changelog="kafka.counts-changelog", partition=0,
                        blobstore="s3://bucket/statectl", config_file="/etc/statectl.toml", profile="prod",
                        settings={"kafka_security_protocol": "SASL_SSL", "kafka_sasl_username": "statectl"})


def test_the_recorded_settings_read_back_as_they_were_written():
    assert FollowerSettings.from_json(json.loads(json.dumps(asdict(GOOD)))) == GOOD


@pytest.mark.parametrize("change", [
    {"argv": ["/bin/sh", "-c", "touch /tmp/x"]},  # a key a follower never records
    {"job": ["page-views"]}, {"job": ""}, {"job": "page\nviews"}, {"kafka": None},
    {"partition": True}, {"partition": "0"}, {"partition": -1}, {"metrics_port": 70000},
    {"state_dir": "state"}, {"replica_dir": "../elsewhere"}, {"config_file": "statectl.toml"},
    {"standby_root": "relative/root"}, {"standby_root": 7},
    {"layout": "anywhere"}, {"to_checkpoint": "yes"},
    {"settings": {"kafka_sasl_password": "hunter22"}},  # a secret is never a recorded setting
    {"settings": {"ld_preload": "/tmp/x.so"}}, {"settings": {"s3_region": "eu\x00west"}}, {"settings": []},
])
def test_a_field_that_is_not_what_a_follower_records_voids_them_all(change):
    obj = dict(asdict(GOOD), **change)
    assert FollowerSettings.from_json(obj) is None
    assert FollowerSettings.from_json("statectl standby follow") is None


def test_the_command_is_this_statectl_with_every_value_attached_to_its_flag():
    hostile = FollowerSettings("broker:9092", "--state-dir=/tmp/x", "1", state_dir="/var/samza/state",
                               task="-rf /", store="; rm -rf /", container=None)
    argv = hostile.argv()
    assert argv[:5] == [sys.executable, "-m", "statectl", "standby", "follow"]
    assert "--job=--state-dir=/tmp/x" in argv and "--task=-rf /" in argv and "--store=; rm -rf /" in argv
    assert [a for a in argv if a.startswith("--state-dir=")] == ["--state-dir=/var/samza/state",]
    assert shlex.split(hostile.command())[1:] == argv[3:]  # what an operator pastes is the same command


def test_the_options_of_a_container_or_pre_restore_follower_come_back():
    s = FollowerSettings("b:1", "j", "1", state_dir="/s", container="0", replica=1, layout="active-path",
                         to_checkpoint=True, metrics_port=0, metrics_addr="127.0.0.1")
    assert s.argv()[5:] == ["--kafka=b:1", "--job=j", "--job-id=1", "--state-dir=/s", "--container=0",
                            "--replica=1", "--layout=active-path", "--metrics-port=0", "--metrics-addr=127.0.0.1",
                            "--to-checkpoint"]
    assert "--pre-restore" in FollowerSettings("b:1", "j", "1", task="t", store="s", pre_restore=True).argv()


def test_a_standby_root_given_comes_back_as_its_flag():
    s = FollowerSettings("b:1", "j", "1", state_dir="/s", standby_root="/replicas", task="t", store="x")
    assert FollowerSettings.from_json(json.loads(json.dumps(asdict(s)))) == s
    assert s.argv()[5:9] == ["--kafka=b:1", "--job=j", "--job-id=1", "--state-dir=/s"]
    assert s.argv()[9] == "--standby-root=/replicas"
    assert not [a for a in GOOD.argv() if a.startswith("--standby-root")]  # the default: no flag


def test_the_environment_keeps_the_promotes_secrets_and_none_of_its_settings():
    promote_env = {"PATH": "/usr/bin", "AWS_SECRET_ACCESS_KEY": "aws-secret", "STATECTL_KAFKA_SASL_PASSWORD": "pw",
                   "STATECTL_S3_SECRET_ACCESS_KEY": "s3-secret", "STATECTL_STATE_DIR": "/other/state",
                   "STATECTL_JOB": "other-job", "STATECTL_CONFIG": "/home/ops/statectl.toml",
                   "STATECTL_FAILPOINTS": "standby-apply=kill"}
    env = GOOD.environment(promote_env)
    assert env == {"PATH": "/usr/bin", "AWS_SECRET_ACCESS_KEY": "aws-secret", "STATECTL_KAFKA_SASL_PASSWORD": "pw",
                   "STATECTL_S3_SECRET_ACCESS_KEY": "s3-secret", "STATECTL_CONFIG": "/etc/statectl.toml",
                   "STATECTL_PROFILE": "prod", "STATECTL_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
                   "STATECTL_KAFKA_SASL_USERNAME": "statectl"}
    assert GOOD.command().startswith("STATECTL_KAFKA_SASL_USERNAME=statectl STATECTL_KAFKA_SECURITY_PROTOCOL=SASL_SSL "
                                     "STATECTL_CONFIG=/etc/statectl.toml STATECTL_PROFILE=prod statectl standby follow ")
    assert "pw" not in GOOD.command().split() and "secret" not in GOOD.command()
