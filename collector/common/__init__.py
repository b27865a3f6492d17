"""Small shared pieces: SSE parsing, bearer checks, bounded bodies, secret files, YAML loading."""
