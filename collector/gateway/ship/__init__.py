"""Shipping: the tap's records to the collector's `POST /v1/records`, in batches from a background
task (shipper.py), when and what to send and what a failed send leaves (policy.py, pure).

The last room on the request path: it imports no other room of the gateway.
"""
