"""Graceful shutdown of one worker: the requests in flight, and the drain that waits for them.

``drain_seconds`` is the whole budget from the stop signal to the exit:

    t=0            SIGTERM: /readyz answers 503 (load balancers stop sending)
    t=ready_delay  the listener and idle keep-alive connections close; new connections are refused
    ...            requests and streams in flight finish on their own
    t=drain        the rest are cut: an open stream gets an in-band error event
                   (code ``shutting_down``), a request not yet answered a 503 with Retry-After
    t=drain+~1s    connections closed, upstream clients closed, the process exits

aiohttp's own ``runner.cleanup(shutdown_timeout=T)`` waits up to T for handlers, then cancels
them and waits up to T again (so a drain took twice its setting), and cuts streams without an
error; so the deadline is ours, and cleanup only closes what is already done.

A request is cut by cancelling its handler task after marking it in ``Inflight``; the places
that write answers (``handlers.send_stream``, ``handlers.relay``, ``front.front_middleware``) ask
``was_cut`` to tell this cancellation from a client that left. No routes, no sockets here.
"""

from __future__ import annotations

import asyncio
import logging
import time

from aiohttp import web

log = logging.getLogger(__name__)

CUT_GRACE = 1.0  # seconds the cut requests get to write their error, and cleanup to close connections


class Inflight:
    """The handler tasks this worker is running, and which of them the drain has cut."""

    __slots__ = ("_cut", "_idle", "_tasks")

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[object]] = set()
        self._cut: set[asyncio.Task[object]] = set()
        self._idle: asyncio.Event | None = None

    def __len__(self) -> int:
        return len(self._tasks)

    def enter(self, task: asyncio.Task[object]) -> None:
        self._tasks.add(task)

    def leave(self, task: asyncio.Task[object]) -> None:
        self._tasks.discard(task)
        self._cut.discard(task)
        if not self._tasks and self._idle is not None:
            self._idle.set()

    async def wait_idle(self, timeout: float) -> bool:
        """Wait until no request is in flight, up to ``timeout`` seconds; True when none is left."""
        if not self._tasks:
            return True
        self._idle = asyncio.Event()
        try:
            async with asyncio.timeout(max(timeout, 0.0)):
                await self._idle.wait()
        except TimeoutError:
            return False
        return True

    def cut_all(self) -> int:
        """Cancel every request still in flight, marked as cut by the drain; how many there were."""
        for task in self._tasks:
            self._cut.add(task)
            task.cancel("toolshim: shutting down")
        return len(self._tasks)

    def was_cut(self, task: asyncio.Task[object] | None) -> bool:
        """Is this task's cancellation the drain's cut (not a client that left)? Clears the
        cancellation so the task can still write its error."""
        if task is None or task not in self._cut:
            return False
        while task.cancelling():
            task.uncancel()
        return True


INFLIGHT = web.AppKey("inflight", Inflight)


def was_cut(request: web.Request) -> bool:
    """Was the current request cut by the drain (see ``Inflight.was_cut``)?"""
    return request.app[INFLIGHT].was_cut(asyncio.current_task())


async def drain(app: web.Application, runner: web.AppRunner, drain_seconds: float, ready_delay: float) -> None:
    """The stop sequence above, from the moment readiness turned false (see the module docstring)."""
    started = time.monotonic()
    deadline = started + drain_seconds
    inflight = app[INFLIGHT]
    await asyncio.sleep(min(ready_delay, drain_seconds))
    for site in list(runner.sites):
        await site.stop()  # the listener closes
    if runner.server is not None:
        runner.server.pre_shutdown()  # idle keep-alive connections close; busy ones after their answer
    log.info("draining: listener closed; %d requests in flight", len(inflight))
    if not await inflight.wait_idle(deadline - time.monotonic()):
        log.warning("drain deadline reached: cutting %d requests still in flight", inflight.cut_all())
        await inflight.wait_idle(CUT_GRACE)
    await runner.cleanup()  # idle keep-alive connections, then the app's cleanup (upstream clients)
    log.info("stopped after draining for %.1fs", time.monotonic() - started)
