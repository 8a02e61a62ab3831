"""statectl: operations tool for the local RocksDB state of stateful stream-processing jobs."""

__version__ = "0.2.0"
