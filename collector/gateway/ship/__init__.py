"""Shipping: the tap's records to the collector's `POST /v1/records`, in batches from a background
task (shipper.py), running the core every record sender shares (collector/record/shipping.py).

The last room on the request path: it imports no other room of the gateway.
"""
