"""Which upstream response headers reach the client: an allowlist, in this one place.

Only pass-through answers (``/v1/completions``, ``/v1/embeddings``, ..., the Responses
pass-through) carry an upstream's headers at all; every other answer, native chat streams
included, is built by toolshim with its own headers. What may pass describes the body and the
retry advice a client acts on. Everything else is dropped, and that is the point:

* ``Set-Cookie`` / ``Set-Cookie2``: a session the upstream opens belongs to toolshim's connection,
  not to every client behind it (and a browser would store it for toolshim's origin);
* ``Access-Control-*``: CORS is toolshim's decision (``TOOLSHIM_CORS_ORIGINS``); an upstream's
  ``Access-Control-Allow-Origin: *`` would open every answer to every web page;
* hop-by-hop headers, ``Content-Length`` and ``Content-Encoding``: the body is re-framed (and
  aiohttp has already decompressed it);
* ``Server``, ``Via``, ``X-Powered-By``, ``Date``: they describe the upstream host, not this answer
  (toolshim sends its own ``Server`` and ``Date``);
* ``X-Request-Id``: toolshim's own id is the one the client can quote;
* ``OpenAI-Organization`` / ``OpenAI-Project``, ``Strict-Transport-Security``, ``WWW-Authenticate``,
  ``Location``: the operator's account, and the upstream host's policies and challenges.
"""

from __future__ import annotations

from collections.abc import Iterable

RELAYED_HEADERS: frozenset[str] = frozenset(
    {
        "content-type",
        "content-disposition",  # a file name for /v1/audio/speech
        "cache-control",
        "retry-after",
        "retry-after-ms",
        "x-should-retry",
        "openai-processing-ms",
        "openai-version",
    }
)
RELAYED_PREFIXES: tuple[str, ...] = ("x-ratelimit-",)


def relayed(name: str) -> bool:
    """May an upstream response header of this name reach the client?"""
    lowered = name.lower()
    return lowered in RELAYED_HEADERS or lowered.startswith(RELAYED_PREFIXES)


def relayable(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The headers among ``headers`` (name, value pairs) that may reach the client."""
    return {name: value for name, value in headers if relayed(name)}
