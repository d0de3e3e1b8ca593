"""Log records stay one line each: no client string can start a forged record.

JSON escapes the ASCII line breaks; the formatter escapes U+0085, U+2028 and U+2029, which JSON
leaves raw (``ensure_ascii=False``) and ``str.splitlines``, log shippers and JavaScript split on.
"""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from toolshim.observe.logs import JsonFormatter

from tests.fakes import FakeUpstream

# every character ``str.splitlines`` breaks a line at
SEPARATORS = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
FORGED = '{"level": "error", "msg": "forged"}'


def lines_of(text: str) -> list[str]:
    return [line for line in text.splitlines() if line]


@pytest.mark.parametrize("sep", SEPARATORS, ids=[f"U+{ord(s[-1]):04X}" for s in SEPARATORS])
def test_a_separator_in_any_part_of_a_record_stays_in_its_line(sep: str) -> None:
    record = logging.LogRecord("toolshim.access", logging.INFO, __file__, 1, "asked %s", (f"a{sep}{FORGED}",), None)
    record.request_id = f"id{sep}{FORGED}"
    record.fields = {"requested_model": f"m{sep}{FORGED}", f"k{sep}": "v"}
    try:
        raise ValueError(f"bad{sep}{FORGED}")
    except ValueError:
        record.exc_info = sys.exc_info()
    (line,) = lines_of(JsonFormatter().format(record))
    entry = json.loads(line)
    assert entry["msg"] == f"asked a{sep}{FORGED}" and entry["requested_model"] == f"m{sep}{FORGED}"
    assert entry["request_id"] == f"id{sep}{FORGED}"


@pytest.fixture
def access_lines() -> Iterator[io.StringIO]:
    """What the access log writes, through the formatter ``serve`` installs."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("toolshim.access")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    yield out
    logger.removeHandler(handler)
    logger.setLevel(level)


async def test_a_client_model_name_and_request_id_cannot_split_the_access_log(
    start_proxy: Any, fake_upstream: FakeUpstream, access_lines: io.StringIO
) -> None:
    proxy = await start_proxy()
    async with aiohttp.ClientSession() as session:
        for sep in SEPARATORS:
            body = {"model": f"m{sep}{FORGED}", "messages": [{"role": "user", "content": "hi"}]}
            async with session.post(proxy.base_url + "/chat/completions", json=body) as resp:
                assert resp.status == 200
        for sep in ("\x85", "\u2028", "\u2029"):  # a header's UTF-8 bytes (no ASCII break passes HTTP)
            headers = {"X-Request-Id": f"r{sep}{FORGED}"}
            async with session.get(proxy.base_url + "/models", headers=headers) as resp:
                assert resp.status == 200
    lines = lines_of(access_lines.getvalue())
    assert len(lines) == len(SEPARATORS) + 3
    assert all(json.loads(line)["msg"] == "request" for line in lines)
    models = [json.loads(line)["requested_model"] for line in lines[: len(SEPARATORS)]]
    assert models == [f"m{sep}{FORGED}" for sep in SEPARATORS]
    ids = [json.loads(line)["request_id"] for line in lines[len(SEPARATORS) :]]
    assert ids == [f"r{sep}{FORGED}" for sep in ("\x85", "\u2028", "\u2029")]
