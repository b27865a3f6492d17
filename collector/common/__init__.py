"""Small shared utilities: the error tree, name and URL checks, bearer checks, bounded bodies,
secret files, YAML loading, settings overrides, the event loop."""
