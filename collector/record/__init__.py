"""The request record: timings and their rules, content, record files and batches, windows, the span join."""
