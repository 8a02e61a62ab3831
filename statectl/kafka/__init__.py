"""Kafka through kafka-python: the checkpoint topic, and reading changelog partitions.

kafka-python is imported inside functions so that ``statectl --help`` stays fast. statectl never joins a
consumer group: it assigns partitions and keeps positions itself, as Samza does (SERVICES.md).
"""
