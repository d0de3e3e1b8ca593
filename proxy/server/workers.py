"""Running toolshim as processes: one worker, or a parent that supervises N workers on one port.

The starting process binds the listening sockets once (``listener``, no ``SO_REUSEPORT``) and
each worker serves them with its own event loop. Signals:

* SIGTERM / SIGINT: the drain (``drain``): readiness false at once, the listener closed after
  ``ready_delay``, requests in flight finished or, at ``drain_seconds`` after the signal, cut
  with an error; then exit 0.
* SIGHUP: reload the rules; invalid new rules are logged and the old ones keep serving. With
  several workers, SIGHUP to the supervisor (or ``POST /admin/reload`` to any worker) reloads
  every worker (``reloads``).

With several workers the parent forwards signals, restarts a worker that dies unexpectedly
(with back-off; it gives up and exits non-zero when workers keep dying at start) and sets
``PROMETHEUS_MULTIPROC_DIR`` so ``/metrics`` adds up all workers. A worker whose parent is gone
(killed with SIGKILL) drains and exits instead of serving on as an orphan.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from multiprocessing.context import SpawnContext
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Any

from ..config.cpus import cpu_budget
from ..config.rules import RulesError
from ..config.settings import Settings, unknown_env_warnings
from ..observe.logs import configure_logging
from ..observe.logthrottle import install_loop_throttle
from . import listener
from .connections import raise_fd_limit
from .reloads import Fleet, ReloadBoard

if TYPE_CHECKING:
    from aiohttp import web

log = logging.getLogger(__name__)

PARENT_CHECK_SECONDS = 0.5  # how often a worker looks whether its supervisor is still there
EXIT_START_FAILED = 3  # a worker that could not start (its rules, say); the supervisor backs off


async def _serve_async(settings: Settings, sockets: list[socket.socket], parent_pid: int | None) -> None:
    from ..config.loading import load_rules
    from .app import create_app, start_site
    from .drain import CUT_GRACE, drain
    from .state import STATE

    install_loop_throttle(asyncio.get_running_loop())  # a flood of accept errors logs a line per 10 s
    board = _board() if parent_pid is not None else None
    generation = board.current().number if board is not None else 0  # read before the rules are
    app = create_app(settings, load_rules(settings.rules_path))
    stop = asyncio.Event()
    orphaned = False

    def begin_drain() -> None:
        # Readiness turns false in the signal callback itself, not a task wake-up later: with uvloop a
        # request already waiting on the socket was otherwise answered "ready" after the signal.
        nonlocal orphaned
        app[STATE].draining = True
        orphaned = orphaned or (parent_pid is not None and os.getppid() != parent_pid)
        stop.set()

    # The handlers come before the listener starts: a signal during start-up drains, never kills.
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, begin_drain)
    _handle_reloads(app, loop, board, parent_pid, generation)
    runner = await start_site(app, settings.host, settings.port, sockets=sockets, shutdown_timeout=CUT_GRACE)
    log.info("toolshim worker %d listening on http://%s:%s", os.getpid(), settings.host, settings.port)
    watcher = asyncio.create_task(_watch_parent(parent_pid, begin_drain)) if parent_pid is not None else None
    await stop.wait()
    if watcher is not None:
        watcher.cancel()
    # An orphan has no load balancer to tell first: its listener closes at once.
    ready_delay = 0.0 if orphaned else settings.ready_delay
    if orphaned:
        log.warning("the supervisor (pid %d) is gone: worker %d stops serving", parent_pid, os.getpid())
    log.info("draining: readiness is false; closing the listener in %.1fs", ready_delay)
    await drain(app, runner, settings.drain_seconds, ready_delay)


def _board() -> ReloadBoard | None:
    """The supervisor's reload board (in its metrics directory), when there is one."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    return ReloadBoard(directory) if directory else None


def _handle_reloads(
    app: web.Application,
    loop: asyncio.AbstractEventLoop,
    board: ReloadBoard | None,
    parent_pid: int | None,
    generation: int,
) -> None:
    """SIGHUP reloads the rules. A supervised worker reports each reload on the board, and so does
    its start (the rules it loaded); a generation that came while it was loading is reloaded now."""
    from .state import STATE, reload_and_report, reload_rules

    if board is None or parent_pid is None:
        loop.add_signal_handler(signal.SIGHUP, lambda: reload_rules(app))
        return
    app[STATE].fleet = Fleet(board, parent_pid)
    loop.add_signal_handler(signal.SIGHUP, lambda: reload_and_report(app, board))
    board.report(generation, True, "started")  # from now on the supervisor signals this worker
    if board.current().number > generation:
        reload_and_report(app, board)


async def _watch_parent(parent_pid: int, on_gone: Callable[[], None]) -> None:
    """The portable half of orphan detection (``PR_SET_PDEATHSIG`` is Linux's): poll ``getppid``."""
    while os.getppid() == parent_pid:
        await asyncio.sleep(PARENT_CHECK_SECONDS)
    on_gone()


def _die_with_parent() -> None:
    """Linux: the kernel sends this worker SIGTERM (a drain) when the supervisor dies, even by SIGKILL."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        log.debug("prctl(PR_SET_PDEATHSIG) is unavailable; the parent is polled instead")


def _run_worker(settings: Settings, sockets: list[socket.socket], parent_pid: int | None = None) -> int:
    """One worker's event loop: uvloop where it is installed (less CPU per request), else asyncio's.

    Returns the exit code: ``EXIT_START_FAILED`` when the rules cannot be loaded (one log line)."""
    configure_logging(settings.log_level)
    raise_fd_limit()  # idle sockets must hit TOOLSHIM_MAX_CONNECTIONS, not the open-files limit
    run: Callable[[Coroutine[Any, Any, None]], None]
    try:
        import uvloop

        run = uvloop.run
        log.debug("event loop: uvloop")
    except ImportError:
        run = asyncio.run
    try:
        run(_serve_async(settings, sockets, parent_pid))
    except RulesError as exc:  # the rules changed since the start: one line, the supervisor backs off
        log.error("worker %d could not start: invalid rules: %s", os.getpid(), str(exc).replace("\n", "; "))
        return EXIT_START_FAILED
    return 0


def _worker_main(settings: Settings, sockets: list[socket.socket], parent_pid: int) -> None:
    """The entry point of a spawned worker."""
    _die_with_parent()
    if os.getppid() != parent_pid:  # the parent died before prctl: do not serve at all
        sys.exit(0)
    sys.exit(_run_worker(settings, sockets, parent_pid))


def serve(settings: Settings, sockets: list[socket.socket] | None = None) -> int:
    """Serve in this process (1 worker) or supervise ``settings.workers`` worker processes.

    ``sockets``: the listeners, already bound (``toolshim serve`` binds them before anything
    else); bound here when not given. Returns the exit code."""
    configure_logging(settings.log_level)
    log.info("%s", start_line(settings))
    for warning in unknown_env_warnings():
        log.warning("%s", warning)
    exposed = not settings.api_keys and not settings.loopback_only
    log.log(logging.WARNING if exposed else logging.INFO, "%s", settings.access_summary())
    if sockets is None:
        try:
            sockets = listener.bind(settings.host, settings.port)
        except OSError as exc:
            log.error("toolshim: %s", listener.describe(exc, settings.host, settings.port))
            return 2
    try:
        if settings.workers <= 1:
            if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
                _prepare_multiprocess_dir()  # a restarted container must not sum the dead process's files
            return _run_worker(settings, sockets)
        return _supervise(settings, sockets)
    finally:
        for sock in sockets:
            sock.close()


def start_line(settings: Settings) -> str:
    """The one start-up line: version, rules, their size, where it listens, how many workers."""
    from .. import __version__
    from ..config.loading import load_rules
    from ..config.rules import RulesError

    try:
        rules = load_rules(settings.rules_path)
        size = f"{len(rules.models)} model rules, {len(rules.upstreams)} upstreams"
        files = ", ".join(str(p) for p in rules.sources)
    except RulesError:
        size, files = "rules not loaded", str(settings.rules_path)
    return (
        f"toolshim {__version__} starting: rules {files} ({size}); http://{settings.host}:{settings.port}, "
        f"{settings.workers} worker{'s' if settings.workers != 1 else ''} ({_workers_source(settings)})"
    )


def _workers_source(settings: Settings) -> str:
    """Where the worker count comes from: the setting, or the CPUs this process may use."""
    if "workers" in settings.model_fields_set:
        return "TOOLSHIM_WORKERS / --workers"
    return f"default: {cpu_budget().describe()}"


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


@dataclass(slots=True)
class RestartPolicy:
    """When to restart a worker that died, and when to stop trying (no I/O, no clock of its own).

    A worker that dies within ``quick`` seconds of its start failed to start; the restart waits
    ``base`` seconds, doubled for each such failure in a row (at most ``cap``); after ``limit``
    in a row the supervisor gives up. A worker that lived longer resets the count."""

    quick: float = 10.0
    limit: int = 5
    base: float = 0.25
    cap: float = 10.0
    failures: int = 0

    def after_death(self, lived: float) -> float | None:
        """Seconds to wait before restarting a worker that lived ``lived`` seconds; None: give up."""
        if lived >= self.quick:
            self.failures = 0
            return self.base
        self.failures += 1
        if self.failures >= self.limit:
            return None
        return min(self.cap, self.base * float(2 ** (self.failures - 1)))


class _Supervisor:
    """The parent of the workers: starts, watches, restarts them; forwards signals."""

    def __init__(self, settings: Settings, sockets: list[socket.socket], ctx: SpawnContext, board: ReloadBoard) -> None:
        self.settings, self.sockets, self.ctx, self.board = settings, sockets, ctx, board
        self.workers: dict[int, tuple[BaseProcess, float]] = {}  # slot -> (process, started at)
        self.pending: dict[int, float] = {}  # slot -> when to restart it
        self.policy = RestartPolicy()
        self.stopping = False
        self.failed = False

    def start(self, slot: int) -> None:
        proc = self.ctx.Process(
            target=_worker_main,
            args=(self.settings, self.sockets, os.getpid()),
            name=f"toolshim-worker-{slot}",
            daemon=False,
        )
        proc.start()
        self.workers[slot] = (proc, time.monotonic())

    def forward(self, signum: int, _frame: object) -> None:
        if signum in (signal.SIGTERM, signal.SIGINT):
            self.stopping = True
        if signum == signal.SIGHUP:
            self._reload_all()
            return
        self._signal_all(signum)

    def _signal_all(self, signum: int) -> None:
        for pid in self._live_pids():
            os.kill(pid, signum)

    def _live_pids(self) -> list[int]:
        return [proc.pid for proc, _started in self.workers.values() if proc.pid is not None and proc.is_alive()]

    def _reload_all(self) -> None:
        """A new reload generation, signalled to the workers that are serving (one still starting
        would die of SIGHUP; it loads the newest rules, and sees the generation, when it starts)."""
        generation = self.board.begin(self._live_pids())
        log.info("rules reload %d: signalling %d workers", generation.number, len(generation.workers))
        for pid in generation.workers:
            os.kill(pid, signal.SIGHUP)

    def run(self) -> int:
        """Watch until every worker has exited; 0, or 1 when workers kept failing at start."""
        from prometheus_client import multiprocess

        while self.workers or (self.pending and not self.stopping):
            time.sleep(0.1)
            if self.stopping:
                self.pending.clear()
                self._close_sockets()  # once the workers close theirs, new connections are refused
            for slot, (proc, started) in list(self.workers.items()):
                if proc.is_alive():
                    continue
                if proc.pid is not None:
                    multiprocess.mark_process_dead(proc.pid)  # type: ignore[no-untyped-call]
                    self.board.forget(proc.pid)
                del self.workers[slot]
                if not self.stopping:
                    self._schedule(slot, proc, time.monotonic() - started)
            for slot, at in list(self.pending.items()):
                if not self.stopping and time.monotonic() >= at:
                    del self.pending[slot]
                    self.start(slot)
        return 1 if self.failed else 0

    def _schedule(self, slot: int, proc: BaseProcess, lived: float) -> None:
        wait = self.policy.after_death(lived)
        if wait is None:
            log.error(
                "toolshim: workers keep failing at start (%d in a row, each within %gs); giving up",
                self.policy.failures,
                self.policy.quick,
            )
            self.failed = self.stopping = True
            self._signal_all(signal.SIGTERM)
            return
        log.error("worker %s exited with %s after %.1fs; restarting it in %.2fs", proc.name, proc.exitcode, lived, wait)
        self.pending[slot] = time.monotonic() + wait

    def _close_sockets(self) -> None:
        for sock in self.sockets:
            sock.close()


def _supervise(settings: Settings, sockets: list[socket.socket]) -> int:
    owned = "PROMETHEUS_MULTIPROC_DIR" not in os.environ
    metrics_dir = _prepare_multiprocess_dir()
    board = ReloadBoard(metrics_dir)
    board.clear()
    supervisor = _Supervisor(settings, sockets, multiprocessing.get_context("spawn"), board)  # prometheus sees the env
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, supervisor.forward)
    for slot in range(settings.workers):
        supervisor.start(slot)
    log.info("toolshim: %d workers on http://%s:%s", settings.workers, settings.host, settings.port)
    try:
        return supervisor.run()
    finally:
        if owned:
            shutil.rmtree(metrics_dir, ignore_errors=True)
