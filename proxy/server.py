"""Running toolshim as processes: one worker, or a parent that supervises N workers on one port.

Each worker is an event loop with the app on a ``SO_REUSEPORT`` socket, so the kernel spreads
connections over workers. Signals:

* SIGTERM / SIGINT: readiness turns false at once (``GET /readyz`` → 503); after
  ``ready_delay`` seconds (so load balancers notice) the listener closes and new connections
  are refused; in-flight requests and streams get up to ``drain_seconds`` to finish; exit 0.
* SIGHUP: reload the rules; invalid new rules are logged and the old ones keep serving.

With several workers the parent forwards signals, restarts a worker that dies unexpectedly,
and sets ``PROMETHEUS_MULTIPROC_DIR`` so ``/metrics`` adds up all workers.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from multiprocessing.process import BaseProcess

from .connections import raise_fd_limit
from .logs import configure_logging
from .logthrottle import install_loop_throttle
from .settings import Settings

log = logging.getLogger(__name__)


async def _serve_async(settings: Settings, reuse_port: bool) -> None:
    from .app import create_app, start_site
    from .rules import load_rules
    from .state import STATE, reload_rules

    install_loop_throttle(asyncio.get_running_loop())  # a flood of accept errors logs a line per 10 s
    app = create_app(settings, load_rules(settings.rules_path))
    runner = await start_site(
        app, settings.host, settings.port, reuse_port=reuse_port, shutdown_timeout=settings.drain_seconds
    )
    log.info("toolshim worker %d listening on http://%s:%s", os.getpid(), settings.host, settings.port)
    stop = asyncio.Event()

    def drain() -> None:
        # Readiness turns false in the signal callback itself, not a task wake-up later: with uvloop a
        # request already waiting on the socket was otherwise answered "ready" after the signal.
        app[STATE].draining = True
        stop.set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, drain)
    loop.add_signal_handler(signal.SIGHUP, lambda: reload_rules(app))
    await stop.wait()
    log.info("draining: readiness is false; closing the listener in %.1fs", settings.ready_delay)
    await asyncio.sleep(settings.ready_delay)
    started = time.monotonic()
    await runner.cleanup()  # closes the listener, waits up to drain_seconds for in-flight requests
    log.info("stopped after draining for %.1fs", time.monotonic() - started)


def _run_worker(settings: Settings, reuse_port: bool) -> None:
    """One worker's event loop: uvloop where it is installed (less CPU per request), else asyncio's."""
    configure_logging(settings.log_level)
    raise_fd_limit()  # idle sockets must hit TOOLSHIM_MAX_CONNECTIONS, not the open-files limit
    try:
        import uvloop
    except ImportError:
        asyncio.run(_serve_async(settings, reuse_port))
        return
    log.debug("event loop: uvloop")
    uvloop.run(_serve_async(settings, reuse_port))


def serve(settings: Settings) -> int:
    """Serve in this process (1 worker) or supervise ``settings.workers`` worker processes."""
    configure_logging(settings.log_level)
    log.info("%s", start_line(settings))
    exposed = not settings.api_keys and not settings.loopback_only
    log.log(logging.WARNING if exposed else logging.INFO, "%s", settings.access_summary())
    if settings.workers <= 1:
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            _prepare_multiprocess_dir()  # a restarted container must not sum the dead process's files
        _run_worker(settings, reuse_port=False)
        return 0
    return _supervise(settings)


def start_line(settings: Settings) -> str:
    """The one start-up line: version, rules, their size, where it listens, how many workers."""
    from . import __version__
    from .rules import RulesError, load_rules

    try:
        rules = load_rules(settings.rules_path)
        size = f"{len(rules.models)} model rules, {len(rules.upstreams)} upstreams"
        files = ", ".join(str(p) for p in rules.sources)
    except RulesError:
        size, files = "rules not loaded", str(settings.rules_path)
    return (
        f"toolshim {__version__} starting: rules {files} ({size}); http://{settings.host}:{settings.port}, "
        f"{settings.workers} worker{'s' if settings.workers != 1 else ''}"
    )


def _prepare_multiprocess_dir() -> str:
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if path:
        os.makedirs(path, exist_ok=True)
        for name in os.listdir(path):  # stale files from an earlier run would be summed in
            if name.endswith(".db"):
                os.unlink(os.path.join(path, name))
        return path
    path = tempfile.mkdtemp(prefix="toolshim-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
    return path


def _supervise(settings: Settings) -> int:
    configure_logging(settings.log_level)
    owned = "PROMETHEUS_MULTIPROC_DIR" not in os.environ
    metrics_dir = _prepare_multiprocess_dir()
    ctx = multiprocessing.get_context("spawn")  # fresh interpreters: prometheus sees the env var
    workers: dict[int, BaseProcess] = {}
    stopping = False

    def start_one(slot: int) -> None:
        proc = ctx.Process(target=_run_worker, args=(settings, True), name=f"toolshim-worker-{slot}", daemon=False)
        proc.start()
        workers[slot] = proc

    def forward(signum: int, _frame: object) -> None:
        nonlocal stopping
        if signum in (signal.SIGTERM, signal.SIGINT):
            stopping = True
        for proc in workers.values():
            if proc.pid is not None and proc.is_alive():
                os.kill(proc.pid, signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    for slot in range(settings.workers):
        start_one(slot)
    log.info("toolshim: %d workers on http://%s:%s", settings.workers, settings.host, settings.port)
    try:
        _watch(workers, start_one, lambda: stopping)
    finally:
        if owned:
            shutil.rmtree(metrics_dir, ignore_errors=True)
    return 0


def _watch(workers: dict[int, BaseProcess], start_one: Callable[[int], None], is_stopping: Callable[[], bool]) -> None:
    """Wait for the workers; restart one that dies while we are not stopping."""
    from prometheus_client import multiprocess

    while workers:
        time.sleep(0.2)
        for slot, proc in list(workers.items()):
            if proc.is_alive():
                continue
            if proc.pid is not None:
                multiprocess.mark_process_dead(proc.pid)  # type: ignore[no-untyped-call]
            del workers[slot]
            if not is_stopping():
                log.error("worker %s exited with %s; restarting it", proc.name, proc.exitcode)
                time.sleep(0.5)
                start_one(slot)
