"""statectl: operations tool for the local RocksDB state of stateful stream-processing jobs."""

__version__ = "0.1.0.dev0"
