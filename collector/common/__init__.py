"""Small shared pieces: the error tree, SSE parsing, bearer checks, bounded bodies, secrets, YAML."""
