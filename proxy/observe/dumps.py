"""Raw-output dumps: each emulated attempt's model text, written to a folder for debugging.

File names never come from request data (a client's ``X-Request-Id`` once chose the path): they
are a timestamp and a random id; the request id is written inside the file, escaped. Writes run
in a worker thread, so a slow disk never stalls the event loop.

A dump outlives the request and is read by people who may not hold the keys: what is written passes
``redact.scrub_credentials`` (every configured secret, and anything shaped like an ``Authorization``
value, an ``sk-`` key or a URL password, which a model may echo from its prompt), and the file is
readable by its owner only. Dumps hold the model's text, never the request's headers.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from pathlib import Path

from .redact import scrub_credentials

log = logging.getLogger(__name__)

DEFAULT_DUMP_DIR = Path("toolshim-dumps")  # used when a rule sets dump_raw_output and TOOLSHIM_DUMP_DIR is unset


class DumpWriter:
    """Writes dumps under one folder; failures are logged, never raised to the request."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path_for(self, attempt_no: int) -> Path:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        return self.folder / f"{stamp}-{uuid.uuid4().hex}-{attempt_no}.txt"

    async def write(self, attempt_no: int, notes: list[str], text: str, request_id: str) -> None:
        header = [f"# request_id={request_id!r}", *notes]
        content = scrub_credentials("\n".join(header) + "\n" + text)
        await asyncio.to_thread(self._write, self.path_for(attempt_no), content)

    def _write(self, path: Path, content: str) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # the owner's alone
            with open(fd, "w", encoding="utf-8") as file:
                file.write(content)
        except OSError as exc:
            log.warning(
                "could not write the raw-output dump to %s (%s); set TOOLSHIM_DUMP_DIR to a writable directory",
                path.parent,
                exc,
            )
