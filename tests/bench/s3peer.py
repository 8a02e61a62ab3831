"""The plain-boto3 peer: a parallel PUT (or GET) of every file of a directory, nothing else.

    python -m tests.bench.s3peer put DIR s3://bucket/prefix --endpoint URL [--threads 8]
    python -m tests.bench.s3peer get s3://bucket/prefix DIR --endpoint URL [--threads 8] [--fsync]

One ``put_object`` per file (no multipart, no checksums beyond what botocore does by default for the
endpoint), one streamed ``get_object`` per object (with ``--fsync``, each file fsynced by the thread that
wrote it, as it completes: the durability a restore gives, at its cheapest); credentials from AWS_ACCESS_KEY_ID /
AWS_SECRET_ACCESS_KEY. Prints one JSON line: files and bytes moved.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlparse

from tests.servers import loopback_s3_client

READ_BUF = 1024 * 1024


def _split(url: str) -> tuple[str, str]:
    p = urlparse(url)
    if p.scheme != "s3" or not p.netloc:
        raise SystemExit(f"expected s3://bucket/prefix, got {url!r}")
    return p.netloc, p.path.strip("/")


def put(client, src: Path, bucket: str, prefix: str, threads: int) -> tuple[int, int]:
    files = sorted(p for p in src.rglob("*") if p.is_file())

    def one(path: Path) -> int:
        key = "/".join(x for x in (prefix, path.relative_to(src).as_posix()) if x)
        size = path.stat().st_size
        with open(path, "rb") as f:
            client.put_object(Bucket=bucket, Key=key, Body=f, ContentLength=size)
        return size

    with ThreadPoolExecutor(threads) as pool:
        sizes = list(pool.map(one, files))
    return len(sizes), sum(sizes)


def get(client, bucket: str, prefix: str, dest: Path, threads: int, fsync: bool = False) -> tuple[int, int]:
    keys = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/" if prefix else ""):
        keys += [o["Key"] for o in page.get("Contents", [])]

    def one(key: str) -> int:
        rel = key[len(prefix) + 1:] if prefix else key
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        body = client.get_object(Bucket=bucket, Key=key)["Body"]
        n = 0
        with open(path, "wb") as f:
            while chunk := body.read(READ_BUF):
                f.write(chunk)
                n += len(chunk)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        return n

    with ThreadPoolExecutor(threads) as pool:
        sizes = list(pool.map(one, keys))
    return len(sizes), sum(sizes)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="s3peer")
    p.add_argument("mode", choices=["put", "get"])
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--endpoint", required=True)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--fsync", action="store_true", help="get: fsync each file as it completes")
    a = p.parse_args(argv)
    client = loopback_s3_client(a.endpoint, os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"],
                                timeout=120.0)
    if a.mode == "put":
        bucket, prefix = _split(a.dst)
        files, nbytes = put(client, Path(a.src), bucket, prefix, a.threads)
    else:
        bucket, prefix = _split(a.src)
        files, nbytes = get(client, bucket, prefix, Path(a.dst), a.threads, a.fsync)
    print(json.dumps({"files": files, "bytes": nbytes}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
