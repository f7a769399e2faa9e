"""The endpoint client of the three roles: HTTP transport, replicas, retries, downtime, context
window and key redaction. Reads the endpoints; writes nothing but what its callers store.
"""
