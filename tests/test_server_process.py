"""``toolshim serve`` as a real process: several workers, graceful drain on SIGTERM, reload on SIGHUP."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import free_port, write_rules
from tests.fakes import FakeUpstream, Reply, completion, text_stream

TOOLSHIM = [sys.executable, "-m", "toolshim"]
USER = [{"role": "user", "content": "hi"}]


async def start_serve(
    rules: Path, *extra: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    log = rules.parent / f"serve-{port}.log"  # a file, not a pipe: an undrained pipe would block the logs
    with log.open("wb") as stderr:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [*TOOLSHIM, "serve", "--rules", str(rules), "--port", str(port), *extra],
            env={**os.environ, **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    url = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as session:
        for _ in range(150):
            try:
                async with session.get(url + "/healthz") as resp:
                    if resp.status == 200:
                        return proc, url
            except aiohttp.ClientError:
                pass
            if proc.poll() is not None:
                raise AssertionError(log.read_text())
            await asyncio.sleep(0.1)
    proc.kill()
    raise AssertionError("toolshim serve did not start")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


async def post_chat(session: aiohttp.ClientSession, url: str, **body: Any) -> tuple[int, str]:
    async with session.post(url + "/v1/chat/completions", json={"model": "m", "messages": USER, **body}) as resp:
        return resp.status, await resp.text()


async def test_two_workers_metrics_add_up(tmp_path: Path, fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(Reply(body=completion("ok")))
    rules = write_rules(tmp_path, fake_upstream.url, [{"match": "*", "upstream": "up"}])
    metrics_dir = tmp_path / "prom"
    proc, url = await start_serve(rules, "--workers", "2", env={"PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)})
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session:
            pids: set[int] = set()
            for _ in range(300):  # the second worker may still be starting: wait until both answer
                async with session.get(url + "/healthz") as resp:
                    pids.add((await resp.json())["pid"])
                if len(pids) == 2:
                    break
                await asyncio.sleep(0.02)
            assert len(pids) == 2, "the second worker never answered"
            results = await asyncio.gather(*(post_chat(session, url) for _ in range(200)))
            assert all(status == 200 for status, _ in results)
            async with session.get(url + "/metrics") as resp:
                text = await resp.text()
        total = 0.0
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "toolshim_requests_total" and sample.labels.get("status") == "2xx":
                    total += sample.value
        assert total == 200
        pids = {p.stem.rsplit("_", 1)[-1] for p in metrics_dir.glob("counter_*.db")}
        assert len(pids) == 2, f"requests were not served by two workers: {pids}"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        stop(proc)


async def test_sigterm_drains_a_running_stream(tmp_path: Path, fake_upstream: FakeUpstream) -> None:
    pieces = [f"word{i} " for i in range(20)]
    fake_upstream.script(Reply(pieces=text_stream(pieces), delay=0.15))
    rules = write_rules(tmp_path, fake_upstream.url, [{"match": "*", "upstream": "up"}])
    proc, url = await start_serve(
        rules, "--workers", "1", env={"TOOLSHIM_DRAIN_SECONDS": "10", "TOOLSHIM_READY_DELAY": "0.5"}
    )
    try:
        async with aiohttp.ClientSession() as session:
            resp = await session.post(
                url + "/v1/chat/completions", json={"model": "m", "messages": USER, "stream": True}
            )
            first = await resp.content.readany()
            assert first
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            async with aiohttp.ClientSession() as probe:
                async with probe.get(url + "/readyz") as ready:
                    assert ready.status == 503
                await asyncio.sleep(1.0)
                with pytest.raises(aiohttp.ClientConnectionError):
                    async with probe.get(url + "/healthz"):
                        pass
            body = first + await resp.read()
            text = body.decode()
            assert "data: [DONE]" in text
            assert all(p.strip() in text for p in pieces), "the stream did not finish intact"
        assert await asyncio.to_thread(proc.wait, 15) == 0
        assert time.monotonic() - started < 10
    finally:
        stop(proc)


async def test_sighup_reloads_rules_and_keeps_old_ones_on_error(tmp_path: Path, fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(Reply(body=completion("ok")))
    rules = write_rules(tmp_path, fake_upstream.url, [{"match": "alpha", "upstream": "up"}])
    proc, url = await start_serve(rules, "--workers", "1")
    try:
        async with aiohttp.ClientSession() as session:
            assert (await post_chat(session, url, model="beta"))[0] == 404
            write_rules(
                tmp_path, fake_upstream.url, [{"match": "alpha", "upstream": "up"}, {"match": "beta", "upstream": "up"}]
            )
            proc.send_signal(signal.SIGHUP)
            for _ in range(50):
                await asyncio.sleep(0.1)
                if (await post_chat(session, url, model="beta"))[0] == 200:
                    break
            assert (await post_chat(session, url, model="beta"))[0] == 200
            rules.write_text("{ models: [ { match: 'gamma', upstream: 'nowhere' } ] }")
            proc.send_signal(signal.SIGHUP)
            await asyncio.sleep(1.0)
            assert (await post_chat(session, url, model="beta"))[0] == 200
            assert (await post_chat(session, url, model="gamma"))[0] == 404
            async with session.get(url + "/metrics") as resp:
                text = await resp.text()
            assert 'toolshim_rules_reloads_total{result="ok"} 1.0' in text
            assert 'toolshim_rules_reloads_total{result="error"} 1.0' in text
    finally:
        stop(proc)


async def test_admin_reload_endpoint(start_proxy, fake_upstream: FakeUpstream, tmp_path: Path) -> None:
    proxy = await start_proxy(models=[{"match": "alpha", "upstream": "up"}], admin_key="adm")
    rules_path = tmp_path / "rules.json5"  # the file start_proxy wrote and the app loads from
    async with aiohttp.ClientSession() as session:
        async with session.post(proxy.url + "/admin/reload") as resp:
            assert resp.status == 401
        write_rules(tmp_path, fake_upstream.url, [{"match": "beta", "upstream": "up"}])
        async with session.post(proxy.url + "/admin/reload", headers={"Authorization": "Bearer adm"}) as resp:
            assert resp.status == 200 and await resp.json() == {"status": "reloaded", "workers": 1}
        assert (await post_chat(session, proxy.url, model="beta"))[0] == 200
        rules_path.write_text("{ nope")
        async with session.post(proxy.url + "/admin/reload", headers={"Authorization": "Bearer adm"}) as resp:
            body = await resp.json()
            assert resp.status == 400 and body["error"]["code"] == "invalid_rules"
        assert (await post_chat(session, proxy.url, model="beta"))[0] == 200


async def test_admin_reload_is_off_without_a_key(start_proxy) -> None:
    proxy = await start_proxy()
    async with aiohttp.ClientSession() as session, session.post(proxy.url + "/admin/reload") as resp:
        assert resp.status == 404


async def test_misspelt_setting_is_warned_about_at_start(tmp_path: Path, fake_upstream: FakeUpstream) -> None:
    rules = write_rules(tmp_path, fake_upstream.url, [{"match": "*", "upstream": "up"}])
    proc, url = await start_serve(rules, "--workers", "1", env={"TOOLSHIM_API_KEY": "sk-client-key-123"})
    try:
        port = url.rsplit(":", 1)[1]
        log = (tmp_path / f"serve-{port}.log").read_text()
        assert "TOOLSHIM_API_KEY is not a toolshim setting; did you mean TOOLSHIM_API_KEYS?" in log
        assert "sk-client-key-123" not in log
    finally:
        stop(proc)


async def both_workers_up(session: aiohttp.ClientSession, url: str) -> set[int]:
    """The pids answering /healthz on fresh connections, once both workers answer."""
    pids: set[int] = set()
    for _ in range(300):
        async with session.get(url + "/healthz") as resp:
            pids.add((await resp.json())["pid"])
        if len(pids) == 2:
            return pids
        await asyncio.sleep(0.02)
    raise AssertionError("the second worker never answered")


async def statuses(session: aiohttp.ClientSession, url: str, model: str, n: int = 40) -> list[int]:
    """``n`` requests for ``model``, each on a fresh connection (so both workers get some)."""
    return [(await post_chat(session, url, model=model))[0] for _ in range(n)]


def fresh_connections() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True))


async def test_admin_reload_reaches_every_worker(tmp_path: Path, fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(Reply(body=completion("ok")))
    rules = write_rules(tmp_path, fake_upstream.url, [{"match": "alpha", "upstream": "up"}])
    proc, url = await start_serve(rules, "--workers", "2", env={"TOOLSHIM_ADMIN_KEY": "adm-key-123"})
    admin = {"Authorization": "Bearer adm-key-123"}
    try:
        async with fresh_connections() as session:
            await both_workers_up(session, url)
            assert set(await statuses(session, url, "beta", 10)) == {404}
            write_rules(
                tmp_path, fake_upstream.url, [{"match": "alpha", "upstream": "up"}, {"match": "beta", "upstream": "up"}]
            )
            async with session.post(url + "/admin/reload", headers=admin) as resp:
                assert resp.status == 200 and await resp.json() == {"status": "reloaded", "workers": 2}
            assert set(await statuses(session, url, "beta")) == {200}
            rules.write_text("{ models: [ { match: 'gamma', upstream: 'nowhere' } ] }")
            async with session.post(url + "/admin/reload", headers=admin) as resp:
                error = (await resp.json())["error"]
            assert resp.status == 400 and error["code"] == "invalid_rules"
            assert "old rules keep serving" in error["message"] and str(tmp_path) not in error["message"]
            assert set(await statuses(session, url, "beta")) == {200}
            assert set(await statuses(session, url, "gamma", 10)) == {404}
    finally:
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 30) == 0
        stop(proc)


async def test_sighup_to_the_supervisor_reloads_every_worker(tmp_path: Path, fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(Reply(body=completion("ok")))
    rules = write_rules(tmp_path, fake_upstream.url, [{"match": "alpha", "upstream": "up"}])
    proc, url = await start_serve(rules, "--workers", "2")
    try:
        async with fresh_connections() as session:
            await both_workers_up(session, url)
            write_rules(tmp_path, fake_upstream.url, [{"match": "beta", "upstream": "up"}])
            proc.send_signal(signal.SIGHUP)
            for _ in range(50):  # both workers log their reload; give them a moment
                await asyncio.sleep(0.1)
                if (tmp_path / f"serve-{url.rsplit(':', 1)[1]}.log").read_text().count("rules reloaded") == 2:
                    break
            assert set(await statuses(session, url, "beta")) == {200}
            assert set(await statuses(session, url, "alpha", 10)) == {404}
    finally:
        stop(proc)


def series(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


MONOTONIC = ("_total", "_count", "_sum", "_bucket", "toolshim_workers_cpu_seconds")


async def test_two_workers_successive_scrapes_agree(tmp_path: Path, fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(Reply(body=completion("ok")))
    rules = write_rules(tmp_path, fake_upstream.url, [{"match": "*", "upstream": "up"}])
    proc, url = await start_serve(rules, "--workers", "2", env={"PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prom")})
    try:
        scrapes = []
        async with fresh_connections() as session:
            await both_workers_up(session, url)
            for _ in range(12):  # each on a fresh connection: either worker answers
                assert set(await statuses(session, url, "m", 6)) == {200}
                async with session.get(url + "/metrics") as resp:
                    scrapes.append(series(await resp.text()))
        first = scrapes[0]
        assert not [key for key in first if key[0].startswith(("process_", "python_gc_"))]
        assert first[("toolshim_workers", ())] == 2
        assert (
            first[("toolshim_workers_resident_memory_bytes", ())]
            > first[("toolshim_worker_max_resident_memory_bytes", ())]
        )
        for before, after in itertools.pairwise(scrapes):
            assert after.keys() == before.keys()
            assert after[("toolshim_workers", ())] == 2
            went_back = [key for key in before if key[0].endswith(MONOTONIC) and after[key] < before[key]]
            assert not went_back, went_back

        def served(samples: dict[Any, float]) -> float:
            return sum(v for (name, labels), v in samples.items() if name == "toolshim_requests_total")

        assert served(scrapes[-1]) - served(first) == 6 * 11
    finally:
        stop(proc)
