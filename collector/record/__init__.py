"""The request record: timings, content, record files and batches, windows, the span join."""
