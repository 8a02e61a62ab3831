"""Byte-exact Samza formats (FORMATS.md): pure functions over bytes and strings, no I/O, no Kafka import."""
