"""RocksDB through rocksdict: store detection, lock checks, checkpoints."""
