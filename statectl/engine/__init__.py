"""The operations. Pure logic over adapters (BlobStore, CheckpointStore, ProgressReporter); never prints."""
