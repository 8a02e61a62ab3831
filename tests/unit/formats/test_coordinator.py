"""The coordinator stream's topic name (FORMATS.md "Coordinator stream")."""

from __future__ import annotations

import pytest

from statectl.errors import UsageError
from statectl.formats.checkpoint import checkpoint_topic
from statectl.formats.coordinator import coordinator_topic


def test_coordinator_topic_replaces_underscores_in_both_names():
    assert coordinator_topic("page-views", "1") == "__samza_coordinator_page-views_1"
    assert coordinator_topic("page_views", "prod_2") == "__samza_coordinator_page-views_prod-2"


def test_coordinator_and_checkpoint_topics_of_a_job_differ_only_in_their_prefix():
    assert coordinator_topic("a_b", "c").removeprefix("__samza_coordinator_") == \
        checkpoint_topic("a_b", "c").removeprefix("__samza_checkpoint_ver_1_for_")


@pytest.mark.parametrize("job", ["page views", "pv/x", "x" * 260])
def test_a_name_that_makes_an_illegal_topic_is_a_usage_error(job: str):
    with pytest.raises(UsageError, match="coordinator topic"):
        coordinator_topic(job, "1")
