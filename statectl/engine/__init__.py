"""The operations. Pure logic over adapters (BlobStore, BlobCheckpointStore, ProgressReporter); never prints."""
