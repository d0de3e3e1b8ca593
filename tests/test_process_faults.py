"""``toolshim serve`` under faults: the drain deadline, a killed supervisor, the port, failing workers.

Real processes on loopback; every wait is bounded. The fixtures and helpers come from
``test_server_process``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import aiohttp
import pytest

from tests.conftest import free_port, write_rules
from tests.fakes import FakeUpstream, Reply, completion, text_stream
from tests.test_server_process import TOOLSHIM, USER, start_serve, stop

ENV_FAST_DRAIN = {"TOOLSHIM_DRAIN_SECONDS": "3", "TOOLSHIM_READY_DELAY": "0.2"}


def gone(pid: int) -> bool:
    """Has the process exited (a zombie waiting for its reaper counts as exited)?"""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "\nState:\tZ" in status


async def worker_pids(url: str, count: int) -> set[int]:
    """The pids of ``count`` workers, read from /healthz over fresh connections."""
    pids: set[int] = set()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session:
        for _ in range(300):
            async with session.get(url + "/healthz") as resp:
                pids.add((await resp.json())["pid"])
            if len(pids) == count:
                return pids
            await asyncio.sleep(0.02)
    raise AssertionError(f"only {len(pids)} of {count} workers answered")


async def test_drain_deadline_cuts_streams_in_band_and_answers_waiting_requests(
    tmp_path: Path, fake_upstream: FakeUpstream
) -> None:
    """TOOLSHIM_DRAIN_SECONDS=3: exit within 3 s plus a small margin; the stream still open at the
    deadline ends with an OpenAI error event, the request still waiting gets a 503 + Retry-After."""
    fake_upstream.script(
        Reply(pieces=text_stream([f"w{i} " for i in range(100)]), delay=0.3),  # 30 s: outlives the drain
        Reply(body=completion("late"), hang=60),
    )
    rules = write_rules(tmp_path, fake_upstream.url, [{"match": "*", "upstream": "up"}])
    proc, url = await start_serve(rules, "--workers", "1", env=ENV_FAST_DRAIN)
    try:
        async with aiohttp.ClientSession() as session:
            streamed = await session.post(
                url + "/v1/chat/completions", json={"model": "m", "messages": USER, "stream": True}
            )
            first = await streamed.content.readany()
            assert first.startswith(b"data: ")
            waiting = asyncio.ensure_future(
                session.post(url + "/v1/chat/completions", json={"model": "m", "messages": USER})
            )
            for _ in range(100):
                if len(fake_upstream.requests) == 2:
                    break
                await asyncio.sleep(0.05)
            assert len(fake_upstream.requests) == 2, "the second request never reached the upstream"
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            text = (first + await asyncio.wait_for(streamed.read(), 10)).decode()
            streamed.release()
            answer = await asyncio.wait_for(waiting, 10)
            cut_at = time.monotonic() - started
            assert answer.status == 503
            assert answer.headers.get("Retry-After") == "1"
            error = (await answer.json())["error"]
            answer.release()
            assert error["code"] == "shutting_down" and error["type"] == "server_error"
            assert set(error) == {"message", "type", "param", "code"}
        events = [e.removeprefix("data: ") for e in text.strip().split("\n\n")]
        assert "[DONE]" not in events, "a cut stream must not look complete"
        last = json.loads(events[-1])
        assert last["error"]["code"] == "shutting_down" and last["error"]["type"] == "server_error"
        assert all(json.loads(e) for e in events)  # every event, the error included, is JSON
        assert await asyncio.to_thread(proc.wait, 10) == 0
        elapsed = time.monotonic() - started
        assert 2.5 <= cut_at <= 4.5, f"cut {cut_at:.1f}s after SIGTERM, expected at the 3 s deadline"
        assert elapsed <= 5.0, f"exited {elapsed:.1f}s after SIGTERM with TOOLSHIM_DRAIN_SECONDS=3"
    finally:
        stop(proc)


async def test_requests_that_finish_in_time_are_not_cut(tmp_path: Path, fake_upstream: FakeUpstream) -> None:
    """The drain does not wait for the deadline when nothing is in flight any more."""
    fake_upstream.script(Reply(pieces=text_stream(["a ", "b ", "c "]), delay=0.3))
    rules = write_rules(tmp_path, fake_upstream.url, [{"match": "*", "upstream": "up"}])
    proc, url = await start_serve(rules, "--workers", "1", env={"TOOLSHIM_DRAIN_SECONDS": "20"})
    try:
        async with aiohttp.ClientSession() as session:
            body = {"model": "m", "messages": USER, "stream": True}
            async with session.post(url + "/v1/chat/completions", json=body) as resp:
                first = await resp.content.readany()
                started = time.monotonic()
                proc.send_signal(signal.SIGTERM)
                text = (first + await resp.read()).decode()
        assert text.rstrip().endswith("data: [DONE]") and "shutting_down" not in text
        assert await asyncio.to_thread(proc.wait, 10) == 0
        assert time.monotonic() - started < 5, "the drain waited although nothing was in flight"
    finally:
        stop(proc)


async def test_workers_exit_when_the_supervisor_is_killed(tmp_path: Path, fake_upstream: FakeUpstream) -> None:
    rules = write_rules(tmp_path, fake_upstream.url, [{"match": "*", "upstream": "up"}])
    proc, url = await start_serve(rules, "--workers", "2", env=ENV_FAST_DRAIN)
    try:
        pids = await worker_pids(url, 2)
        proc.kill()  # SIGKILL: the supervisor cannot forward anything
        proc.wait(10)
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline and not all(gone(pid) for pid in pids):
            await asyncio.sleep(0.1)
        alive = [pid for pid in pids if not gone(pid)]
        for pid in alive:
            os.kill(pid, signal.SIGKILL)  # do not leave them behind, whatever the verdict
        assert not alive, f"workers {alive} kept running after their supervisor was killed"
        port = int(url.rsplit(":", 1)[1])
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
    finally:
        stop(proc)


def run_serve(rules: Path, port: int, *extra: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TOOLSHIM, "serve", "--rules", str(rules), "--port", str(port), *extra],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={k: v for k, v in os.environ.items() if k != "TOOLSHIM_WORKERS"},
    )


@pytest.mark.parametrize("workers", ["1", "2"])
async def test_a_port_served_by_another_toolshim_is_refused(
    tmp_path: Path, fake_upstream: FakeUpstream, workers: str
) -> None:
    rules = write_rules(tmp_path, fake_upstream.url, [{"match": "*", "upstream": "up"}])
    first, url = await start_serve(rules, "--workers", "2")
    try:
        port = int(url.rsplit(":", 1)[1])
        second = await asyncio.to_thread(run_serve, rules, port, "--workers", workers)
        assert second.returncode == 2
        assert second.stderr.strip() == (
            f"toolshim: port {port} on 127.0.0.1 is already in use; choose another with --port (TOOLSHIM_PORT)"
        )
        assert first.poll() is None, "the first toolshim must keep serving"
    finally:
        first.send_signal(signal.SIGTERM)
        await asyncio.to_thread(first.wait, 15)
        stop(first)


@pytest.mark.parametrize("workers", ["1", "2"])
async def test_a_port_held_with_so_reuseport_is_refused(tmp_path: Path, workers: str) -> None:
    """Another server that set SO_REUSEPORT would otherwise share its port with toolshim's workers."""
    rules = write_rules(tmp_path, "http://127.0.0.1:9", [{"match": "*", "upstream": "up"}])
    with socket.socket() as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        result = await asyncio.to_thread(run_serve, rules, port, "--workers", workers)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "already in use" in result.stderr


async def test_workers_that_keep_dying_at_start_make_the_supervisor_give_up(
    tmp_path: Path, fake_upstream: FakeUpstream
) -> None:
    """Restarts back off and stop: a worker whose rules became invalid cannot start; after a few
    tries in a row the supervisor stops the rest and exits non-zero, with a bounded log."""
    rules = write_rules(tmp_path, fake_upstream.url, [{"match": "*", "upstream": "up"}])
    proc, url = await start_serve(rules, "--workers", "2", env=ENV_FAST_DRAIN)
    log = tmp_path / f"serve-{url.rsplit(':', 1)[1]}.log"
    try:
        pids = await worker_pids(url, 2)
        rules.write_text("{ models: [ { match: '*', upstream: 'nowhere' } ] }")
        os.kill(min(pids), signal.SIGKILL)
        started = time.monotonic()
        code = await asyncio.to_thread(proc.wait, 45)
        elapsed = time.monotonic() - started
        lines = log.read_text().splitlines()
        assert code == 1
        assert sum("giving up" in line for line in lines) == 1
        restarts = [line for line in lines if "restarting it in" in line]
        assert 3 <= len(restarts) <= 5, restarts
        assert len(lines) < 40, f"{len(lines)} log lines"
        assert "Traceback" not in log.read_text()
        waits = [float(line.split("restarting it in ")[1].split("s")[0]) for line in restarts]
        assert waits == sorted(waits) and waits[-1] > waits[0], f"no back-off: {waits}"
        assert elapsed < 40
        assert all(gone(pid) for pid in pids), "the healthy worker must stop with the supervisor"
    finally:
        stop(proc)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to restrict the process to one")
async def test_worker_count_defaults_to_the_cpus_this_process_may_use(tmp_path: Path) -> None:
    rules = write_rules(tmp_path, "http://127.0.0.1:9", [{"match": "*", "upstream": "up"}])
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as stderr:
        proc = subprocess.Popen(
            [*TOOLSHIM, "serve", "--rules", str(rules), "--port", str(port)],
            env={k: v for k, v in os.environ.items() if k != "TOOLSHIM_WORKERS"},
            preexec_fn=lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}),  # like taskset -c
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        for _ in range(100):
            if "listening on" in log.read_text() or proc.poll() is not None:
                break
            await asyncio.sleep(0.1)
        text = log.read_text()
        assert "1 worker (default: 1 usable CPUs (affinity 1," in text, text
        assert "toolshim: 2 workers" not in text
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(proc.wait, 15)
        stop(proc)
