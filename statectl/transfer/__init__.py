"""Bytes between local files and the blob store: parallel upload and download with streaming CRC32."""
