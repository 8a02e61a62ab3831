"""The text a rescale prints (statectl.cli.rescale): a key-group rescale that read nothing reports its copies,
not a key count it never took."""

from __future__ import annotations

from statectl.cli.rescale import _text
from statectl.engine.rescale.result import RescaleResult, TargetInfo


def _result(keys: int = 0, **kw) -> RescaleResult:
    return RescaleResult("s", "j", "j8", 4, 8, keys, "keygroups:128", [],
                         [TargetInfo("Partition 0", 0, "snap", "cp", 3, 300)], committed=True, verified=True, **kw)


def test_a_key_group_rescale_that_read_nothing_reports_its_copies():
    text = _text(_result(key_groups=128, bytes_copied=2048, files_copied=5))
    assert "target Partition 0: snapshot snap" in text and "keys" not in text
    assert "by 128 key groups: 2.0 KiB copied server-side unread (5 files), committed" in text


def test_one_that_read_sources_reports_the_keys_it_verified():
    text = _text(_result(key_groups=128, files_rewritten=2, keys=10, content_hash="ab"))
    assert "target Partition 0: 0 keys, snapshot snap" in text and "10 keys verified (content hash ab)" in text
    assert "10 keys verified" in _text(_result(keys=10, content_hash="ab"))
