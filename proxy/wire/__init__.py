"""The OpenAI wire protocol every layer shares: the error tree and its one rendering (``errors``),
server-sent events both ways (``sse``), and the JSON codec for bodies and chunks (``jsoncodec``).

Sans-IO; imports only ``observe`` (secrets are masked in every error body).
"""
