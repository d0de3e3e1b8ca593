"""Security: ``/metrics`` is open by default (as before) and needs its own key once
``TOOLSHIM_METRICS_KEY`` is set; a client key does not open it."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from toolshim.config.settings import load_settings

METRICS_KEY = "metrics-key-0123456789"
CLIENT_KEY = "client-key-0123456789"


async def scrape(proxy: Any, headers: dict[str, str] | None = None) -> tuple[int, str, dict[str, str]]:
    async with aiohttp.ClientSession() as session, session.get(proxy.url + "/metrics", headers=headers) as resp:
        return resp.status, await resp.text(), dict(resp.headers)


async def test_metrics_are_open_without_a_metrics_key(start_proxy: Any) -> None:
    proxy = await start_proxy(api_keys=(CLIENT_KEY,))
    status, text, _ = await scrape(proxy)
    assert status == 200 and "toolshim_requests_in_flight" in text


@pytest.mark.parametrize(
    "headers",
    [
        None,
        {"Authorization": "Bearer wrong-key-0123456789"},
        {"Authorization": f"Bearer {CLIENT_KEY}"},  # a client key is for /v1, not for the operator's figures
        {"Authorization": f"Basic {METRICS_KEY}"},
    ],
    ids=["none", "wrong", "client-key", "not-bearer"],
)
async def test_a_metrics_key_guards_metrics(start_proxy: Any, headers: dict[str, str] | None) -> None:
    proxy = await start_proxy(api_keys=(CLIENT_KEY,), metrics_key=METRICS_KEY)
    status, text, response_headers = await scrape(proxy, headers)
    assert status == 401 and "toolshim_" not in text and METRICS_KEY not in text
    assert response_headers["x-should-retry"] == "false"
    status, text, _ = await scrape(proxy, {"Authorization": f"Bearer {METRICS_KEY}"})
    assert status == 200 and "toolshim_requests_in_flight" in text
    async with aiohttp.ClientSession() as session, session.get(proxy.url + "/healthz") as resp:
        assert resp.status == 200  # probes stay open


def test_the_metrics_key_comes_from_the_environment() -> None:
    assert load_settings(env={"TOOLSHIM_METRICS_KEY": METRICS_KEY}).metrics_key == METRICS_KEY
    assert load_settings(env={}).metrics_key is None
