"""The deployment configs (Prometheus, Alertmanager, Kubernetes, Compose, the degrade policy) as package data.

deploy/ is the folder users copy from; it is also a data-only package, so an installed lanewatch
finds these files with importlib.resources (the demo starts Prometheus and Alertmanager from them).
"""
