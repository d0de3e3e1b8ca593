"""Shared fixtures: a fake upstream server, the proxy on a real port, OpenAI SDK clients.

Also a compatibility shim: aioresponses 0.7.9 builds ``ClientResponse`` without the
``stream_writer`` keyword that aiohttp 3.14 requires (pnuckowski/aioresponses#289, fix not
released); we supply it.
"""

from __future__ import annotations

import gc
import inspect
import os
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import json5
import pytest
from aiohttp import web
from hypothesis import settings
from toolshim.config.loading import load_rules
from toolshim.config.settings import Settings
from toolshim.observe.metrics import Metrics
from toolshim.server.app import create_app, start_site

from tests.fakes import FakeUpstream

# CI runs the property tests with a fixed seed and no example database, so a run is reproducible and
# a red build always means the same failing input. Locally they explore new inputs every run.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def _patch_aioresponses() -> None:
    """Give aioresponses' ``ClientResponse(...)`` calls the ``stream_writer`` aiohttp 3.14 requires."""
    if "stream_writer" not in inspect.signature(aiohttp.ClientResponse.__init__).parameters:
        return
    real_init = aiohttp.ClientResponse.__init__
    if getattr(real_init, "_toolshim_shim", False):
        return

    def init(self: aiohttp.ClientResponse, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("stream_writer", None)
        real_init(self, *args, **kwargs)

    init._toolshim_shim = True  # type: ignore[attr-defined]
    aiohttp.ClientResponse.__init__ = init  # type: ignore[method-assign]


_patch_aioresponses()


@pytest.fixture(autouse=True, scope="module")
def _earlier_modules_frozen() -> None:
    """Earlier test modules' live objects left out of garbage collection from here on.

    The proxy under test runs in the test session, whose heap grows with every module to over a million
    objects; a full collection over it then stalls the event loop for seconds (1.7 s measured before
    the timing tests of ``test_event_loop_fairness.py``), while a serving proxy holds under 100,000
    objects. Garbage is collected first, so only what is still alive is frozen."""
    gc.collect()
    gc.freeze()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _serve_fake() -> tuple[FakeUpstream, web.AppRunner]:
    fake = FakeUpstream()
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/tokenize", fake.tokenize)
    app.router.add_post("/extras/tokenize", fake.tokenize)
    app.router.add_route("*", "/{tail:.*}", fake.handle)
    runner = web.AppRunner(app, handler_cancellation=True)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    fake.url = f"http://127.0.0.1:{port}/v1"
    return fake, runner


@pytest.fixture
async def fake_upstream() -> AsyncIterator[FakeUpstream]:
    fake, runner = await _serve_fake()
    yield fake
    await runner.cleanup()


@pytest.fixture
async def attacker() -> AsyncIterator[FakeUpstream]:
    """A listener standing in for a host an attacker chose: tests assert it receives nothing."""
    fake, runner = await _serve_fake()
    yield fake
    await runner.cleanup()


def write_rules(
    tmp_path: Path, upstream_url: str, models: list[dict[str, Any]], upstream_extra: dict[str, Any] | None = None
) -> Path:
    path = tmp_path / "rules.json5"
    doc = {"upstreams": {"up": {"base_url": upstream_url, **(upstream_extra or {})}}, "models": models}
    path.write_text(json5.dumps(doc, indent=2))
    return path


class Proxy:
    """The proxy under test, on a real port: ``url`` for the OpenAI SDK, ``metrics`` for asserts."""

    def __init__(self, url: str, app: web.Application, metrics: Metrics) -> None:
        self.url = url
        self.base_url = url + "/v1"
        self.app = app
        self.metrics = metrics


ProxyFactory = Callable[..., Any]


@pytest.fixture
async def start_proxy(tmp_path: Path, fake_upstream: FakeUpstream) -> AsyncIterator[ProxyFactory]:
    """``await start_proxy(models=[...], **settings)`` → a running ``Proxy`` before the fake upstream."""
    runners: list[web.AppRunner] = []

    async def start(
        models: list[dict[str, Any]] | None = None, upstream_extra: dict[str, Any] | None = None, **settings: Any
    ) -> Proxy:
        models = models or [{"match": "*", "upstream": "up", "tool_mode": "native"}]
        path = write_rules(tmp_path, fake_upstream.url, models, upstream_extra)
        metrics = Metrics()
        app = create_app(Settings(**{"rules_path": path, **settings}), load_rules(path), metrics)
        port = free_port()
        runners.append(await start_site(app, "127.0.0.1", port))
        return Proxy(f"http://127.0.0.1:{port}", app, metrics)

    yield start
    for runner in runners:
        await runner.cleanup()
