"""Session fixtures for the real-model tests: a llama.cpp server, a recording relay, a toolshim.

Started once per test session, stopped at its end. The stack is

    OpenAI SDK -> toolshim -> (recording relay ->) llama.cpp server (Qwen2.5-Coder-0.5B, CPU)

Emulated models go through the relay so tests can check what toolshim sent upstream and what
the model server answered; the native model and ``qwen-hermes-direct`` talk to the server
directly (the disconnect tests must not depend on how the relay propagates a closed socket).

Needs ``make llama model`` first (``make test`` does it). ``TOOLSHIM_TEST_MODEL=smollm`` picks the
small alternative model. Deselect with ``-m "not realmodel"``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from openai import OpenAI

from scripts.local_model import LocalModelError
from scripts.local_stack import Service, start_model_server, start_toolshim, stop
from tests.realmodel.recorder import RecordingRelay

TEST_MODEL = os.environ.get("TOOLSHIM_TEST_MODEL", "qwen")

# Exposed model name -> (tool_mode, upstream): one rule per mode under test.
MODEL_RULES: dict[str, tuple[str, str]] = {
    "qwen-native": ("native", "direct"),
    "qwen-hermes": ("hermes", "recorded"),
    "qwen-react": ("react", "recorded"),
    "qwen-hermes-direct": ("hermes", "direct"),
    "qwen-hermes-constrained": ("hermes", "recorded"),
    "qwen-pythonic-constrained": ("pythonic", "recorded"),
}
# Rule options besides the mode (the constrained path: a GBNF grammar, llama.cpp's dialect).
# The default re-ask temperature: the grammar holds every schema in test_constrained.py (integer bounds
# included, proxy/intrange.py), so no answer is re-asked and the greedy first attempt is the answer.
RULE_OPTIONS: dict[str, dict[str, Any]] = {
    "qwen-hermes-constrained": {"constrained": True},
    "qwen-pythonic-constrained": {"constrained": True},
}


@pytest.fixture(scope="session")
def llama() -> Iterator[Service]:
    """The llama.cpp server with the test model, loaded and able to generate."""
    try:
        server = start_model_server(TEST_MODEL)
    except LocalModelError as exc:
        pytest.fail(
            f"cannot start the local model server ({exc}); run `make llama model` first, "
            f"or deselect these tests with -m 'not realmodel'",
            pytrace=False,
        )
    yield server
    stop(server)


@pytest.fixture(scope="session")
def relay(llama: Service) -> Iterator[RecordingRelay]:
    """The recording relay in front of the model server."""
    relay = RecordingRelay(llama.root)
    relay.start()
    yield relay
    relay.stop()


@pytest.fixture(scope="session")
def toolshim(llama: Service, relay: RecordingRelay) -> Iterator[Service]:
    """toolshim serving one rule per mode under test."""
    rules: dict[str, Any] = {
        "upstreams": {
            "direct": {"base_url": llama.base_url},
            "recorded": {"base_url": relay.base_url, "constraint_dialect": "gbnf"},
        },
        "models": [
            {
                "match": name,
                "upstream": upstream,
                "tool_mode": mode,
                "upstream_model": llama.model_id,
                **RULE_OPTIONS.get(name, {}),
            }
            for name, (mode, upstream) in MODEL_RULES.items()
        ],
    }
    try:
        proxy = start_toolshim(rules)
    except LocalModelError as exc:
        pytest.fail(f"cannot start toolshim: {exc}", pytrace=False)
    yield proxy
    stop(proxy)


@pytest.fixture
def client(toolshim: Service) -> Iterator[OpenAI]:
    """The real OpenAI SDK pointed at toolshim (no retries: a failure must show, not be papered over)."""
    with OpenAI(base_url=toolshim.base_url, api_key="unused", timeout=120, max_retries=0) as sdk:
        yield sdk


@pytest.fixture
def direct(llama: Service) -> Iterator[OpenAI]:
    """The OpenAI SDK pointed straight at the model server."""
    with OpenAI(base_url=llama.base_url, api_key="unused", timeout=120, max_retries=0) as sdk:
        yield sdk


@pytest.fixture
def recorded(relay: RecordingRelay) -> RecordingRelay:
    """The relay with an empty record, so a test sees only its own upstream exchanges."""
    relay.clear()
    return relay
