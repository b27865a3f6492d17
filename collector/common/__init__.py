"""True utilities, eight modules: the error tree, name, URL and listen-address checks, the header
names, secrets and bearer checks, the settings base and flag overrides, YAML and package-data
files, uvicorn's limits and bounded bodies, and the event loop."""
