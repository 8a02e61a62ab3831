"""Benchmarks of statectl against its peers (rclone, plain boto3) on one SeaweedFS server: ``make bench``.

    .venv/bin/python -m tests.bench.run [--quick] [--size-gib 1] [--big-gib 4] [--runs 3]

A plain script, not pytest: it measures and reports (stdout and .bench/results.json), it asserts nothing.
"""
