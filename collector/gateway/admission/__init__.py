"""Admission: what becomes of a request before it goes upstream. Its class, its lane, the degrade
state applied to it (shift, cap, shed), the model its lane serves it as, and the lanes' models
as declared or learned from their upstreams.

The second room on the request path: at run time it imports only the front (its error answers).
"""
