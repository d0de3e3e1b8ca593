"""Rules reloads that reach every worker: a small board of files the supervisor and workers share.

With several workers, a reload is the supervisor's: SIGHUP to it (from the operator, or from the
worker that received ``POST /admin/reload``) makes it write a new *generation* naming the workers
that are serving, then forward SIGHUP to each of them. A worker reads the generation, reloads,
and writes its result for that generation. The admin handler waits, within a bound, until every
worker named has reported that generation or a later one, and answers how many reloaded.

A worker reads the generation *before* it loads the rules, so a report for generation ``g`` means
rules read after ``g`` was written. A worker that is still starting is not signalled (SIGHUP would
kill it before its handler is installed): it reports once serving, and reloads at once if a
generation came while it was loading. Files are replaced atomically (``os.replace``); they live
in the metrics directory the supervisor owns (``PROMETHEUS_MULTIPROC_DIR``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

POLL_SECONDS = 0.05
_GENERATION = "reload-generation.json"
_REPORT_PREFIX = "reload-worker-"


@dataclass(frozen=True, slots=True)
class Generation:
    number: int
    workers: tuple[int, ...]  # the pids asked to reload


@dataclass(frozen=True, slots=True)
class Report:
    generation: int
    ok: bool
    message: str


@dataclass(slots=True)
class Outcome:
    """What came of one generation: who reloaded, who refused the new rules, who did not answer."""

    generation: int
    reloaded: list[int] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)  # pid -> why
    silent: list[int] = field(default_factory=list)  # neither answered in time nor exited


class ReloadBoard:
    """The shared files: the current generation (supervisor) and one report per worker."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    # ---- the supervisor ------------------------------------------------------------------

    def clear(self) -> None:
        """Forget an earlier run's files (a reused metrics directory)."""
        for path in self.directory.glob("reload-*.json"):
            path.unlink(missing_ok=True)

    def begin(self, live: Iterable[int]) -> Generation:
        """A new generation for the live workers that are serving (have reported); returns it."""
        serving = set(self.started())
        generation = Generation(self.current().number + 1, tuple(sorted(p for p in live if p in serving)))
        self._write(self.directory / _GENERATION, {"generation": generation.number, "workers": generation.workers})
        return generation

    def forget(self, pid: int) -> None:
        """A worker exited: its report goes with it."""
        self._report_path(pid).unlink(missing_ok=True)

    def started(self) -> list[int]:
        """The workers that have reported at least once (they are serving and handle SIGHUP)."""
        pids = []
        for path in self.directory.glob(f"{_REPORT_PREFIX}*.json"):
            suffix = path.stem.removeprefix(_REPORT_PREFIX)
            if suffix.isdigit():
                pids.append(int(suffix))
        return pids

    # ---- a worker ------------------------------------------------------------------------

    def current(self) -> Generation:
        data = _read(self.directory / _GENERATION)
        if data is None:
            return Generation(0, ())
        return Generation(int(data.get("generation", 0)), tuple(int(p) for p in data.get("workers", ())))

    def report(self, generation: int, ok: bool, message: str, pid: int | None = None) -> None:
        """This worker's result for ``generation`` (read before it loaded the rules)."""
        path = self._report_path(pid or os.getpid())
        self._write(path, {"generation": generation, "ok": ok, "message": message})

    def report_of(self, pid: int) -> Report | None:
        data = _read(self._report_path(pid))
        if data is None:
            return None
        return Report(int(data.get("generation", 0)), bool(data.get("ok")), str(data.get("message", "")))

    # ---- the admin handler ---------------------------------------------------------------

    async def wait(self, after: int, timeout: float) -> Outcome | None:
        """Wait for the first generation past ``after`` and every named worker's report on it
        (a worker that exits meanwhile is not waited for). None: no generation came in time."""
        deadline = time.monotonic() + timeout
        generation = self.current()
        while generation.number <= after:
            if time.monotonic() >= deadline:
                return None
            await asyncio.sleep(POLL_SECONDS)
            generation = self.current()
        while True:
            outcome, pending = self._collect(generation)
            if not pending or time.monotonic() >= deadline:
                outcome.silent = pending
                return outcome
            await asyncio.sleep(POLL_SECONDS)

    def _collect(self, generation: Generation) -> tuple[Outcome, list[int]]:
        outcome, pending = Outcome(generation.number), []
        for pid in generation.workers:
            report = self.report_of(pid)
            if report is not None and report.generation >= generation.number:
                if report.ok:
                    outcome.reloaded.append(pid)
                else:
                    outcome.failed[pid] = report.message
            elif _alive(pid):
                pending.append(pid)
        return outcome, pending

    # ---- files ---------------------------------------------------------------------------

    def _report_path(self, pid: int) -> Path:
        return self.directory / f"{_REPORT_PREFIX}{pid}.json"

    @staticmethod
    def _write(path: Path, data: dict[str, Any]) -> None:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, another user's: not one of ours, but alive
        return True
    return True


@dataclass(frozen=True, slots=True)
class Fleet:
    """A supervised worker's way to reload every worker: its supervisor's pid and the board."""

    board: ReloadBoard
    supervisor: int

    async def reload(self, timeout: float) -> Outcome | None:
        """Ask the supervisor for a reload of all workers; wait for their reports (see ``wait``)."""
        before = self.board.current().number
        os.kill(self.supervisor, signal.SIGHUP)
        return await self.board.wait(before, timeout)
