"""Connection bounds in real processes: ``toolshim serve`` (uvloop), the open-files limit, and the
rate-limited accept-error log under a real asyncio accept flood. Loopback only, bounded in time."""

from __future__ import annotations

import asyncio
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import aiohttp
from toolshim.observe.logthrottle import LogThrottle

from tests.conftest import write_rules
from tests.fakes import FakeUpstream
from tests.test_connections import CHAT_HEAD, HOST, error_of, exchange, trickle
from tests.test_core_errors import assert_error
from tests.test_server_process import post_chat, start_serve, stop

NATIVE = [{"match": "*", "upstream": "up", "tool_mode": "native"}]


async def test_toolshim_serve_on_uvloop_bounds_slow_idle_and_excess_connections(
    tmp_path: Path, fake_upstream: FakeUpstream
) -> None:
    env = {
        "TOOLSHIM_HEAD_TIMEOUT": "1",
        "TOOLSHIM_BODY_TIMEOUT": "1",
        "TOOLSHIM_KEEPALIVE_TIMEOUT": "1.5",
        "TOOLSHIM_MAX_CONNECTIONS": "20",
    }
    proc, url = await start_serve(write_rules(tmp_path, fake_upstream.url, NATIVE), "--workers", "1", env=env)
    port = int(url.rsplit(":", 1)[1])
    try:
        body_head = CHAT_HEAD + b"Content-Length: 100\r\n\r\n{"
        idle, slow_head, slow_body = await asyncio.gather(
            trickle(port, b"", b"", 3600, 6.0),
            trickle(port, CHAT_HEAD, b"X-A: b\r\n", 0.2, 6.0),
            trickle(port, body_head, b" ", 0.2, 6.0),
        )
        assert idle.status is None and idle.closed_after < 4.0
        assert slow_head.status == 408 and slow_head.closed_after < 4.0
        assert_error(error_of(slow_head), code="request_timeout")
        assert slow_body.status == 408 and slow_body.closed_after < 4.0
        assert_error(error_of(slow_body), code="request_timeout")

        bad = await exchange(port, b"GET /healthz HTTP/1.1\r\n" + HOST + b"X-Long: " + b"a" * 9000 + b"\r\n\r\n")
        assert bad.status == 400
        assert_error(error_of(bad), code="bad_http_request")

        conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(60)]  # three times the cap
        async with aiohttp.ClientSession() as session:
            assert (await post_chat(session, url))[0] == 200  # a new client still gets in
            async with session.get(url + "/metrics") as resp:
                text = await resp.text()
        assert 'toolshim_connection_drops_total{reason="idle_evicted"}' in text
        for _, writer in conns:
            writer.close()
    finally:
        stop(proc)


def test_the_log_throttle_lets_one_of_a_kind_through_per_interval() -> None:
    now = [0.0]
    throttle = LogThrottle(10.0, clock=lambda: now[0])
    assert throttle.admit("accept") == 0
    assert [throttle.admit("accept") for _ in range(5)] == [None] * 5
    assert throttle.admit("other") == 0  # kinds are separate
    now[0] = 10.5
    assert throttle.admit("accept") == 5  # the next one says how many were held back
    assert throttle.admit("accept") is None


_FLOOD = """
import asyncio, io, logging, resource, subprocess, sys
from toolshim.observe.logthrottle import install_loop_throttle

log = io.StringIO()
logging.basicConfig(stream=log, level=logging.INFO)

async def main():
    install_loop_throttle(asyncio.get_running_loop(), interval=1.0)
    held = []
    async def hold(reader, writer):
        held.append(writer)
    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48))
    client = subprocess.Popen([sys.executable, "-c", CLIENT.format(port=port)])
    await asyncio.sleep(2.5)
    client.kill()
    client.wait()
    for writer in held:
        writer.close()
    server.close()

CLIENT = '''
import socket, time
socks = []
for _ in range(120):
    try:
        socks.append(socket.create_connection(("127.0.0.1", {port}), timeout=1))
    except OSError:
        pass
time.sleep(5)
'''
asyncio.run(main())
lines = [l for l in log.getvalue().splitlines() if "out of system resource" in l]
print(len(lines))
print(sum("were not logged" in l for l in lines))
"""


def test_an_accept_flood_on_the_asyncio_loop_logs_a_line_per_interval() -> None:
    """Out of descriptors, asyncio's accept loop reports an error about a thousand times a second
    (with a traceback each); throttled, it logs about one line per interval, counting the rest."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_FLOOD)], capture_output=True, text=True, timeout=60, check=True
    )
    logged, with_count = (int(n) for n in done.stdout.split())
    assert 1 <= logged <= 4, done.stdout
    assert with_count >= 1  # the flood went on past the first interval and was counted


def test_the_worker_raises_its_open_files_limit_to_the_hard_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = min(soft, 256)

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))

    code = "import resource; from toolshim.server.connections import raise_fd_limit; print(raise_fd_limit()); "
    code += "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True, preexec_fn=lower
    )
    expected = hard if hard != resource.RLIM_INFINITY else 1 << 20
    assert [int(n) for n in done.stdout.split()] == [expected, expected]
