"""What operators see: metrics, JSON logs, raw-output dumps, secret redaction, the request context.

Nothing here knows about chat, formats or upstreams; every other package may import it. It imports
only the standard library and prometheus-client.
"""
