"""The chat pipeline, one way through: body -> typed turn -> policies -> rewrite -> upstream ->
decoder -> parser -> builder -> chat chunks (or, through ``responses``, Responses events).

``turn`` (with ``schemas``, ``toolschema`` and ``limits``) parses and validates a request once;
``policies`` (with ``repeats``) and ``toolrank`` decide what the model is offered; ``grounding`` judges a
call's values against the conversation and ``coverage`` what the question still asks about; ``rewrite`` renders
the upstream request; ``modes`` picks native, emulated or auto; ``emulation`` is the I/O loop and the re-ask
decision; ``builder`` (sans-IO) turns parser events into items, ``gate`` judging each call read whole,
with ``echo``, ``mentions``, ``plaincalls``, ``stops`` and ``usage`` as its filters and counters and
``callids`` for call ids; ``chunks`` renders chat-completion chunks.
May import ``formats``, ``constrain``, ``upstream``, ``config``, ``wire`` and ``observe``; never the
server or ``responses``.
"""
