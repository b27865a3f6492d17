"""The prober: synthetic requests against a target, their errors, spans, prompts and suites."""
