"""Samza checkpoint keys and values, byte for byte.

The expected bytes come from Samza's sources: TestKafkaCheckpointLogKeySerde.testBinaryCompatibility (key),
KafkaCheckpointManagerFactory (topic), CheckpointV2Serde / JsonCheckpointV2Mixin / SamzaObjectMapper (v2),
KafkaStateCheckpointMarker with its mixin (marker, as FORMATS.md quotes it), CheckpointV1Serde (v1).
"""

from __future__ import annotations

import json

import pytest

from statectl.errors import UsageError
from statectl.formats.checkpoint import (BLOB_STORE_FACTORY, GROUP_BY_PARTITION_FACTORY, KAFKA_CHANGELOG_FACTORY,
                                         KEY_TYPE_V1, KEY_TYPE_V2, SSP, CheckpointFormatError, CheckpointKey,
                                         CheckpointV1, CheckpointV2, KafkaChangelogMarker, checkpoint_topic,
                                         decode_changelog_marker, decode_key, decode_v1, decode_v2,
                                         encode_changelog_marker, encode_key, encode_v1, encode_v2, jackson_json,
                                         java_hashmap_order, java_string_hash, parse_checkpoint_id, parse_ssp_key,
                                         split_changelog_offset)

# TestKafkaCheckpointLogKeySerde.testBinaryCompatibility, verbatim.
SAMZA_V1_KEY = (b'{"systemstreampartition-grouper-factory"'
                b':"org.apache.samza.container.grouper.stream.GroupByPartitionFactory","taskName":"Partition 0",'
                b'"type":"checkpoint"}')
CID = "1614147487244-33577"  # the example id in CheckpointV2Serde's javadoc


# -- constants and topic ---------------------------------------------------------------------------


def test_factory_class_names():
    assert GROUP_BY_PARTITION_FACTORY == "org.apache.samza.container.grouper.stream.GroupByPartitionFactory"
    assert BLOB_STORE_FACTORY == "org.apache.samza.storage.blobstore.BlobStoreStateBackendFactory"
    assert KAFKA_CHANGELOG_FACTORY == "org.apache.samza.storage.KafkaChangelogStateBackendFactory"
    assert (KEY_TYPE_V1, KEY_TYPE_V2) == ("checkpoint", "checkpoint-v2")


@pytest.mark.parametrize("job, job_id, topic", [
    ("page-views", "1", "__samza_checkpoint_ver_1_for_page-views_1"),
    ("page_views", "prod_2", "__samza_checkpoint_ver_1_for_page-views_prod-2"),
    ("a.b", "1", "__samza_checkpoint_ver_1_for_a.b_1"),
])
def test_checkpoint_topic_replaces_underscores_in_both_names(job, job_id, topic):
    assert checkpoint_topic(job, job_id) == topic


def test_checkpoint_topic_must_be_a_legal_kafka_name():
    with pytest.raises(UsageError, match="not a legal Kafka topic name"):
        checkpoint_topic("page views", "1")


# -- keys ------------------------------------------------------------------------------------------


def test_v1_key_bytes_are_samzas():
    assert encode_key(CheckpointKey("Partition 0", KEY_TYPE_V1)) == SAMZA_V1_KEY


def test_v2_key_bytes():
    assert encode_key(CheckpointKey("Partition 0")) == SAMZA_V1_KEY.replace(b'"checkpoint"', b'"checkpoint-v2"')


def test_key_decodes_in_any_order_and_ignores_unknown_fields():
    key = decode_key(b'{"type":"checkpoint-v2","extra":1,"taskName":"Partition 7",'
                     b'"systemstreampartition-grouper-factory":"com.example.MyGrouperFactory"}')
    assert key == CheckpointKey("Partition 7", KEY_TYPE_V2, "com.example.MyGrouperFactory")
    assert key.version == 2
    assert decode_key(SAMZA_V1_KEY).version == 1
    assert CheckpointKey("t", "something-else").version is None


@pytest.mark.parametrize("data", [None, b"", b"not json", b"[]", b'{"taskName":"P0","type":"checkpoint"}',
                                  b'{"systemstreampartition-grouper-factory":"g","taskName":1,"type":"checkpoint"}',
                                  b"\xff\xfe"])
def test_bad_keys(data):
    with pytest.raises(CheckpointFormatError):
        decode_key(data)


def test_task_names_are_escaped_as_jackson_does():
    key = CheckpointKey('Task "a"\\b/\u00e9\t\x01\x7f')
    raw = encode_key(key)
    assert b'"taskName":"Task \\"a\\"\\\\b/\xc3\xa9\\t\\u0001\x7f"' in raw
    assert decode_key(raw) == key


# -- v2 values -------------------------------------------------------------------------------------


def test_v2_value_bytes():
    cp = CheckpointV2(CID, {"kafka.PageViews.0": "4267"}, {BLOB_STORE_FACTORY: {"counts": "blob-1"}})
    assert encode_v2(cp) == (
        b'{"checkpoint-id":"1614147487244-33577","input-offsets":{"kafka.PageViews.0":"4267"},'
        b'"state-checkpoint-markers":{"org.apache.samza.storage.blobstore.BlobStoreStateBackendFactory":'
        b'{"counts":"blob-1"}},"version":2}')
    assert decode_v2(encode_v2(cp)) == cp


def test_v2_decodes_any_order_version_and_unknown_fields():
    data = json.dumps({
        "state-checkpoint-markers": {KAFKA_CHANGELOG_FACTORY: {"s": "m"}},
        "future-field": {"x": 1},
        "input-offsets": {"kafka.PageViews.0.-1": "5", "kafka.Clicks.3": None},
        "version": 2,
        "checkpoint-id": "1-2",
    }).encode()
    cp = decode_v2(data)
    assert cp.checkpoint_id == "1-2"
    assert cp.input_offsets == {"kafka.PageViews.0.-1": "5", "kafka.Clicks.3": None}
    assert cp.state_checkpoint_markers == {KAFKA_CHANGELOG_FACTORY: {"s": "m"}}


def test_v2_missing_maps_read_as_empty():
    assert decode_v2(b'{"checkpoint-id":"1-2"}') == CheckpointV2("1-2", {}, {})


@pytest.mark.parametrize("data", [
    None, b"{", b"[]", b'{"input-offsets":{}}', b'{"checkpoint-id":"abc"}', b'{"checkpoint-id":"-1-2"}',
    b'{"checkpoint-id":"1-2","input-offsets":[]}', b'{"checkpoint-id":"1-2","input-offsets":{"a.b.0":5}}',
    b'{"checkpoint-id":"1-2","state-checkpoint-markers":{"f":"x"}}',
    b'{"checkpoint-id":"1-2","state-checkpoint-markers":{"f":{"s":1}}}',
])
def test_bad_v2_values(data):
    with pytest.raises(CheckpointFormatError):
        decode_v2(data)


def test_v2_encode_refuses_a_bad_checkpoint_id():
    with pytest.raises(CheckpointFormatError):
        encode_v2(CheckpointV2("latest"))


def test_checkpoint_ids():
    assert parse_checkpoint_id(CID) == (1614147487244, 33577)
    assert parse_checkpoint_id("1700000000000-7") < parse_checkpoint_id("1700000000000-10")
    for bad in ("", "1-", "-1", "1-2\n", "a-b", 5):
        with pytest.raises(CheckpointFormatError):
            parse_checkpoint_id(bad)  # type: ignore[arg-type]


# -- the Kafka changelog marker --------------------------------------------------------------------


def test_changelog_marker_string_is_the_one_in_formats_md():
    marker = KafkaChangelogMarker(SSP("kafka", "my-store-changelog", 0), "4267")
    text = encode_changelog_marker(marker)
    assert text == ('{"version":1,"changelog-ssp":{"system":"kafka","partition":0,"stream":"my-store-changelog",'
                    '"keyBucket":-1},"changelog-offset":"4267"}')
    assert decode_changelog_marker(text) == marker


def test_changelog_marker_with_null_offset_and_old_shapes():
    marker = KafkaChangelogMarker(SSP("kafka", "c", 3), None)
    assert encode_changelog_marker(marker).endswith('"changelog-offset":null}')
    # no keyBucket (before Samza's elasticity work), another version, any key order
    assert decode_changelog_marker('{"changelog-offset":"9","version":2,'
                                   '"changelog-ssp":{"stream":"c","partition":3,"system":"kafka"}}') \
        == KafkaChangelogMarker(SSP("kafka", "c", 3), "9")


@pytest.mark.parametrize("text", ["", "blobId-1234", "kafka;c;3;9", '{"changelog-offset":"1"}',
                                  '{"changelog-ssp":{"system":"k","stream":"c","partition":"3"}}',
                                  '{"changelog-ssp":{"system":"k","stream":"c","partition":3},"changelog-offset":5}'])
def test_bad_changelog_markers(text):
    with pytest.raises(CheckpointFormatError):
        decode_changelog_marker(text)


# -- v1 values -------------------------------------------------------------------------------------


def test_v1_value_bytes():
    cp = CheckpointV1({SSP("kafka", "PageViews", 0): "4267"})
    assert encode_v1(cp) == (b'{"SystemStreamPartition [kafka, PageViews, 0]":'
                             b'{"system":"kafka","partition":"0","offset":"4267","stream":"PageViews"}}')
    assert decode_v1(encode_v1(cp)) == cp


def test_v1_changelog_entries_and_null_offsets():
    cp = CheckpointV1({SSP("kafka", "PageViews", 0): "4267",
                       SSP("kafka", "counts-changelog", 0): f"{CID}:880",
                       SSP("kafka", "other-changelog", 0): None})
    back = decode_v1(encode_v1(cp))
    assert back == cp
    assert split_changelog_offset(back.offsets[SSP("kafka", "counts-changelog", 0)]) == (CID, "880")
    assert split_changelog_offset(f"{CID}:null") == (CID, None)
    assert split_changelog_offset("880") == (None, "880")
    assert split_changelog_offset(None) == (None, None)


@pytest.mark.parametrize("data", [None, b"[]", b'{"x":"y"}', b'{"x":{"system":"k","stream":"s"}}',
                                  b'{"x":{"system":"k","stream":"s","partition":0,"offset":"1"}}',
                                  b'{"x":{"system":"k","stream":"s","partition":"zero","offset":"1"}}'])
def test_bad_v1_values(data):
    with pytest.raises(CheckpointFormatError):
        decode_v1(data)


# -- SSPs and Java's HashMap order -------------------------------------------------------------------


def test_ssp_forms():
    ssp = SSP("kafka", "PageViews", 3)
    assert ssp.key() == "kafka.PageViews.3"
    assert ssp.java_string() == "SystemStreamPartition [kafka, PageViews, 3]"
    assert list(ssp.to_json()) == ["system", "partition", "stream", "keyBucket"]
    assert SSP.from_json(ssp.to_json()) == ssp


@pytest.mark.parametrize("text, ssp", [
    ("kafka.PageViews.0", SSP("kafka", "PageViews", 0)),
    ("kafka.PageViews.0.-1", SSP("kafka", "PageViews", 0, -1)),
    ("kafka.PageViews.2.5", SSP("kafka", "PageViews", 2, 5)),
    ("kafka.page.views.v2.7", SSP("kafka", "page.views.v2", 7)),
])
def test_parse_ssp_keys(text, ssp):
    assert parse_ssp_key(text) == ssp


@pytest.mark.parametrize("text", ["", "kafka", "kafka.PageViews", "kafka.PageViews.x", ".s.0"])
def test_bad_ssp_keys(text):
    with pytest.raises(CheckpointFormatError):
        parse_ssp_key(text)


def test_java_string_hash_matches_java():
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == 0x80000000  # Integer.MIN_VALUE
    assert java_string_hash("\U0001F600") == (31 * 0xD83D + 0xDE00)  # UTF-16 code units


def test_java_hashmap_order():
    # SamzaObjectMapper's SSP HashMap prints as FORMATS.md (and Samza) show it.
    assert java_hashmap_order(["system", "stream", "partition", "keyBucket"]) == \
        ["system", "partition", "stream", "keyBucket"]
    # CheckpointV1Serde's HashMap(4) of one SSP grows to 8 buckets.
    assert java_hashmap_order(["system", "stream", "partition", "offset"], 4) == \
        ["system", "partition", "offset", "stream"]
    # Equal hashes share a bucket and keep their insertion order.
    assert java_hashmap_order(["BB", "Aa"]) == ["BB", "Aa"]
    assert java_hashmap_order(["Aa", "BB"]) == ["Aa", "BB"]
    assert java_hashmap_order([], 0) == []


def test_jackson_json_is_compact_utf8():
    assert jackson_json({"a": [1, None, True, False], "b": "\u00e9/\n\x1f"}) == \
        b'{"a":[1,null,true,false],"b":"\xc3\xa9/\\n\\u001F"}'
    # UTF8JsonGenerator (writeValueAsBytes) escapes every UTF-16 surrogate, paired or not.
    assert jackson_json({"\U0001F600": "\ud800"}) == b'{"\\uD83D\\uDE00":"\\uD800"}'
    with pytest.raises(CheckpointFormatError):
        jackson_json({"a": 1.5})


def test_non_bmp_task_names_round_trip_through_escaped_surrogate_pairs():
    key = CheckpointKey("Task \U0001F600")
    raw = encode_key(key)
    assert b'"taskName":"Task \\uD83D\\uDE00"' in raw
    assert decode_key(raw) == key


def test_changelog_marker_is_written_as_a_string_then_escaped_by_the_outer_value():
    """KafkaStateCheckpointMarker.serialize uses writeValueAsString (non-BMP left as is); the v2 value
    around it uses writeValueAsBytes, which escapes it once."""
    marker = encode_changelog_marker(KafkaChangelogMarker(SSP("kafka", "s\U0001F600", 0), "1"))
    assert '"stream":"s\U0001F600"' in marker
    raw = encode_v2(CheckpointV2("1-2", {}, {KAFKA_CHANGELOG_FACTORY: {"store": marker}}))
    assert b'\\"stream\\":\\"s\\uD83D\\uDE00\\"' in raw
    assert decode_changelog_marker(decode_v2(raw).state_checkpoint_markers[KAFKA_CHANGELOG_FACTORY]["store"]) \
        == KafkaChangelogMarker(SSP("kafka", "s\U0001F600", 0), "1")


@pytest.mark.parametrize("value, key", [
    ("1700000000000-382917", (1700000000000, 382917)), ("1-2-3", (1, 2)), ("1-2-x", (1, 2)), ("+1-2", (1, 2)),
    ("+0-+0", (0, 0)), ("1-2-", (1, 2)), ("1-2--", (1, 2)), ("0-0", (0, 0)), ("007-000123", (7, 123)),
    (f"{2 ** 63 - 1}-{2 ** 63 - 1}", (2 ** 63 - 1, 2 ** 63 - 1)),
    # Long.parseLong takes the decimal digits of every script in the BMP (Character.digit).
    ("\u0661-\u0662", (1, 2)), ("\uff11\uff10-5", (10, 5)), ("1\u0660-\u09e7", (10, 1)),
])
def test_checkpoint_ids_are_read_as_samza_reads_them(value, key):
    """CheckpointId.deserialize: not blank, split on '-', the first two parts by Long.parseLong."""
    assert parse_checkpoint_id(value) == key


@pytest.mark.parametrize("value", [
    "", " ", "1", "-1-2", "1--2", "1-", "-", "--", "a-1", "1-b", "99999999999999999999-1", f"1-{2 ** 63}",
    "1 -2", " 1-2", "1-2 ", "1-2\n", "1.5-2", "1e3-2", "1_000-2", "+-1", "++1-2", "+", "+-+", "0x1-2",
    "\U0001D7CF-2",  # MATHEMATICAL BOLD DIGIT ONE: two chars (a surrogate pair) to Java, not a digit
    "\u00b9-2",  # SUPERSCRIPT ONE: a digit to str.isdigit, not to Character.digit
    "\u2460-2",  # CIRCLED DIGIT ONE
    None, 5,
])
def test_what_samza_would_not_read_is_not_a_checkpoint_id(value):
    with pytest.raises(CheckpointFormatError):
        parse_checkpoint_id(value)


def test_local_checkpoint_dirs_need_the_canonical_form():
    from statectl.formats.checkpoint import is_canonical_checkpoint_id

    assert is_canonical_checkpoint_id("1700000000000-5")
    assert not is_canonical_checkpoint_id("1-2-3") and not is_canonical_checkpoint_id("+1-2")
    assert not is_canonical_checkpoint_id("99999999999999999999-1")
