"""engine.adstore.load: the mode adstore load runs is chosen from its one options object, and flags that do
not go with that mode are refused before anything connects or writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from statectl.engine.adstore.common import SparkOptions
from statectl.engine.adstore.load import DATASET, FILES, TOPIC, LoadOptions
from statectl.errors import UsageError

STATE = Path("/nonexistent/state")


def test_the_mode_follows_the_source_flags():
    assert LoadOptions("s", STATE, bootstrap="b:1", topics=("t",)).mode == TOPIC
    assert LoadOptions("s", STATE, bootstrap="b:1", job="pv").mode == TOPIC  # the job's side inputs
    assert LoadOptions("s", STATE, bootstrap="b:1", topics=("t",), dataset_versions=True).mode == DATASET
    assert LoadOptions("s", STATE, from_file=Path("/d.csv")).mode == FILES
    assert LoadOptions("s", STATE, topics=("t",)).runs_until_stopped
    assert not LoadOptions("s", STATE, topics=("t",), dry_run=True).runs_until_stopped
    assert not LoadOptions("s", STATE, from_file=Path("/d.csv")).runs_until_stopped


@pytest.mark.parametrize("kw, msg", [
    ({"topics": ("t",), "from_file": Path("/d.csv")}, "needs --topic or --from-file"),
    ({}, "needs --topic or --from-file"),
    ({"topics": ("t",), "partition_count": 2}, "--partition-count is for --from-file"),
    ({"from_file": Path("/d.csv"), "partitions": (0,)}, "--partitions selects a topic's partitions"),
    ({"topics": ("t",), "end_marker": "END"}, "--end-marker is for --dataset-versions"),
    ({"topics": ("a", "b"), "dataset_versions": True}, "reads one --topic"),
    ({"topics": ("t",), "dataset_versions": True, "max_age_s": 60.0}, "do not combine with it"),
    ({"topics": ("t",), "keep_versions": 3}, "are for --from-file"),
    ({"topics": ("t",), "follow": True, "spark": SparkOptions()}, "does not combine with --spark"),
    ({"from_file": Path("/d.csv"), "max_age_s": 0.0}, "are for --topic"),
    ({"from_file": Path("/d.csv"), "broadcast": True}, "--broadcast is for --topic"),
])
def test_flags_that_do_not_go_with_the_mode_are_refused(kw, msg):
    with pytest.raises(UsageError, match=msg):
        LoadOptions("s", STATE, bootstrap="b:1", **kw).validate()


def test_the_store_is_named_first():
    with pytest.raises(UsageError, match="needs --store"):
        LoadOptions(None, STATE, topics=("t",)).validate()


def test_topic_and_file_fields_name_different_things():
    """--key-field/--value-field name a record's JSON fields for a topic, a file's columns for files."""
    topic = LoadOptions("s", STATE, bootstrap="b:1", topics=("t", "u"), key_field="id", value_field="v")
    assert topic.topic_options().topic == "t" and topic.topic_options().topics == ("u",)
    assert (topic.topic_options().spec.key_field, topic.topic_options().spec.value_field) == ("id", "v")
    files = LoadOptions("s", STATE, from_file=Path("/d.csv"), key_field="id", value_field="v", partition_count=4)
    fo = files.file_options()
    assert (fo.spec.key_column, fo.spec.value_column, fo.partitions) == ("id", "v", 4)
    fo.validate()
