"""rescale: re-partition the snapshots of a store's N tasks into M tasks on Spark.

The modules, in the order a rescale runs them: options (what is asked), plan (every check and read before
the Spark job: the sources resolved, the record of an earlier run read by rerun, the --from layout checked by
layout, a key-group rescale planned by keygroup_plan), execute (the run: dry run, run again, or the hash or
key-group path), build (the Spark job, the staged target stores and their verification), keygroups (the
key-group path), upload (the targets as snapshots with TTLs) and commit (record, commit, clean up); result
is what the command reports.

Two paths. Hash-partitioned stores (below). Key-group stores (``key_groups``), as Flink rescales its
RocksDB state: each source's MANIFEST gives its files' key ranges; every file a target needs is copied
server-side into the target's snapshot unread (statectl.transfer.copy), and the key groups those files hold
beyond the target's are clipped off by range deletions in small SST files above them
(statectl.rocks.rangedel); each target's snapshot is its copies and range deletions under a MANIFEST
written for them (statectl.rocks.manifest), uploaded and committed as below. No Spark job runs, and no
source byte is read, unless a source cannot be taken file by file (a non-empty WAL, or files reaching into
another source's key groups of the same target): the hash path's Spark job then reads that source whole
into per-target partial stores, verified as below, whose files the target lists too.

The hash path:

resolve the source snapshots (latest, or named) -> what the blob store records of this rescale: done, or
cut in its commit, it is finished there -> check that the sources are the --from layout -> a Spark job
(statectl.spark, source "snapshots"), one task per source and no shuffle: the executor reads its source
snapshot from the blob store (CRC32-checked while it streams; for a local master statectl downloads them
while the job starts: build.Prefetch), checks that each key belongs to its source's
task, routes it with the job's partitioner, a batch at a time, checks each key given to a target against it,
and writes it into that target's SST file of this source as it reads (a source's keys come in key order, so
each target's share does too) -> ingest each target's files, one per source, into a staged store (their key
ranges overlap, no key is in two: RocksDB's ingestion puts them in L0 at sequence numbers of their own) ->
verify, from the job's figures (key count and order-independent content hash of the targets equal
those of the entries read from the sources; each staged store holds the entries written for it) -> upload the M new snapshots with TTLs, as backup
does (their SST files from the moment the executors finish them, while the job runs: early), and check their
blobs -> record the rescale -> commit the M checkpoint records -> post-commit cleanup
(the TTLs go; catalog.commit's prepare_commit and finish_commit, as backup and snapshots copy use them).
Nothing is committed before every target is uploaded and verified: a failure or a kill before that leaves
the sources as they were and only TTL'd blobs behind (gc reclaims them). The source snapshots are only read.

The new checkpoints carry no changelog position: the old partitioning's changelog offsets mean nothing for
the new tasks. With a Kafka checkpoint topic, a target task whose latest checkpoint names a changelog
position for the store gets a marker with no offset (its changelog partition = the task's number).
"""
