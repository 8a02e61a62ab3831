"""standby: hot replicas of a task's stores kept current from their changelogs, promoted in seconds.

Each module owns one concern and uses the others' public names only:

- replica: a replica's dir, its lock, promote lock and status files, its offset files;
- dirs: where a replica may live (the standby root, --layout active-path) and moving one an older statectl kept;
- changelog: which changelog system, topic and partition a task's store is logged to;
- follow: `standby follow` of one replica;
- nextstart: how the job's next start restores a store, and so what of a promoted replica it keeps;
- fence, follower: stopping a follower for a promote, and starting it again from its recorded settings;
- promote: `standby promote` of one replica;
- prerestore, prerestore_follow, prerestore_promote: the same for a job that restores a store from the blob store;
- status: `standby status`;
- placement: the job's locality, which promote points at this host, and `standby check`;
- container, container_promote, journal, failover: whole containers (follow, promote, failover).

The reasoning about Samza's restore modes, locality and the refusals (exit 14) is in docs/standby.md.
"""
