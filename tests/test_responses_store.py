"""The response store's promises, end to end with the OpenAI SDK: stored responses belong to the client
key that made them (another key's id is an unknown id on every route), a ``previous_response_id``
chain is held to ``TOOLSHIM_MAX_MESSAGES`` as a whole, and an id that cannot be one is a 400 on every
route that takes one, never a 500. The Redis store gets the same ownership checks in
``test_responses_redis.py``.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import openai
import pytest
from openai import AsyncOpenAI

from tests.fakes import FakeUpstream

KEY_A, KEY_B = "client-key-a-0123456789", "client-key-b-9876543210"
UNKNOWN = "resp_" + "0" * 48


def keyed(proxy: Any, key: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=proxy.base_url, api_key=key, max_retries=0)


async def raw(proxy: Any, method: str, path: str, key: str | None = None, body: Any = None) -> tuple[int, Any]:
    """A request as sent (the path already encoded); the status and the JSON answer."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, proxy.base_url + path, json=body, headers=headers) as resp,
    ):
        text = await resp.text()
        return resp.status, json.loads(text) if resp.content_type == "application/json" else text


def without_id(answer: Any, response_id: str) -> Any:
    """The answer with the id it names replaced: two 404s for different ids compared as shapes."""
    return json.loads(json.dumps(answer).replace(response_id, "<id>"))


async def check_owners(proxy: Any, fake_upstream: FakeUpstream) -> None:
    """Key A stores a response; key B can neither read, list, delete, continue nor reference it, and each
    refusal is the answer an unknown id gets. A still has it afterwards."""
    async with keyed(proxy, KEY_A) as a:
        first = await a.responses.create(model="m", input="A's secret plan")
    message_id = first.output[0].id
    sent = len(fake_upstream.requests)
    for method, suffix in (("GET", ""), ("DELETE", ""), ("GET", "/input_items")):
        theirs = await raw(proxy, method, f"/responses/{first.id}{suffix}", KEY_B)
        unknown = await raw(proxy, method, f"/responses/{UNKNOWN}{suffix}", KEY_B)
        assert theirs[0] == unknown[0] == 404, (theirs, unknown)
        assert theirs[1]["error"]["code"] == "response_not_found"
        assert without_id(theirs[1], first.id) == without_id(unknown[1], UNKNOWN)
    async with keyed(proxy, KEY_B) as b:
        with pytest.raises(openai.NotFoundError) as err:
            await b.responses.create(model="m", input="go on", previous_response_id=first.id)
        assert err.value.body["param"] == "previous_response_id"  # type: ignore[index]
        with pytest.raises(openai.BadRequestError) as bad:
            await b.responses.create(model="m", input=[{"type": "item_reference", "id": message_id}])
        assert bad.value.body["param"] == "input[0].id"  # type: ignore[index]
    assert len(fake_upstream.requests) == sent  # nothing of A's went upstream in B's name
    async with keyed(proxy, KEY_A) as a:
        assert (await a.responses.retrieve(first.id)).output_text == first.output_text
        assert [i.type for i in (await a.responses.input_items.list(first.id)).data] == ["message"]
        await a.responses.create(
            model="m", input=[{"type": "item_reference", "id": message_id}, {"role": "user", "content": "more"}]
        )
        await a.responses.create(model="m", input="and?", previous_response_id=first.id)
    assert "A's secret plan" in json.dumps(fake_upstream.requests[-1])


async def test_a_keys_responses_are_unknown_to_another_key(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    proxy = await start_proxy(api_keys=(KEY_A, KEY_B), data_dir=tmp_path)
    await check_owners(proxy, fake_upstream)
    stored = b"".join(path.read_bytes() for path in tmp_path.glob("responses.sqlite3*"))
    assert KEY_A.encode() not in stored and KEY_B.encode() not in stored  # the owner is a digest, not the key


async def test_a_store_from_before_owners_belongs_to_the_anonymous_owner(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    """An existing file gets the owner column: its records stay readable without keys, nobody's with keys."""
    record = {"response": {"id": "resp_old", "object": "response", "output": []}, "input": [], "context": []}
    with sqlite3.connect(tmp_path / "responses.sqlite3") as conn:
        conn.execute("CREATE TABLE responses (id TEXT PRIMARY KEY, expires_at REAL NOT NULL, body TEXT NOT NULL)")
        conn.execute(
            "CREATE TABLE items (id TEXT PRIMARY KEY, response_id TEXT NOT NULL, expires_at REAL NOT NULL, "
            "body TEXT NOT NULL)"
        )
        conn.execute("INSERT INTO responses VALUES (?, ?, ?)", ("resp_old", 1e12, json.dumps(record)))
    conn.close()
    keyed_proxy = await start_proxy(api_keys=(KEY_A,), data_dir=tmp_path)
    assert (await raw(keyed_proxy, "GET", "/responses/resp_old", KEY_A))[0] == 404
    open_proxy = await start_proxy(data_dir=tmp_path)
    status, answer = await raw(open_proxy, "GET", "/responses/resp_old")
    assert status == 200 and answer["id"] == "resp_old"


async def test_a_chain_is_held_to_the_message_limit(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    """Each turn adds its input and output to the conversation; the turn that would pass the limit is a
    400 naming previous_response_id, and no request upstream ever carries more messages than the limit."""
    proxy = await start_proxy(data_dir=tmp_path, max_messages=5)
    async with keyed(proxy, "unused") as c:
        previous = await c.responses.create(model="m", input="one")  # conversation: 2 items
        for text in ("two", "three"):  # 4, then 6 items
            previous = await c.responses.create(model="m", input=text, previous_response_id=previous.id)
        with pytest.raises(openai.BadRequestError) as err:
            await c.responses.create(model="m", input="four", previous_response_id=previous.id)
        assert err.value.body["param"] == "previous_response_id"  # type: ignore[index]
        assert err.value.body["code"] == "too_many_items"  # type: ignore[index]
        with pytest.raises(openai.BadRequestError) as err:  # 5 items + the instructions: 6 messages
            await c.responses.create(model="m", input=[{"role": "user", "content": "x"}] * 5, instructions="be brief")
        assert err.value.body["param"] == "input"  # type: ignore[index]
    assert len(fake_upstream.requests) == 3
    assert max(len(request["messages"]) for request in fake_upstream.requests) <= 5


ODD_IDS = [
    pytest.param("\ud800", id="lone-surrogate"),
    pytest.param("resp_\x00", id="nul"),
    pytest.param("resp_" + "a" * 200, id="over-long"),
    pytest.param("resp_a:b", id="colon"),
    pytest.param("a b", id="space"),
    pytest.param("rés", id="non-ascii"),
    pytest.param("a/b", id="slash"),
    pytest.param("%2e%2e", id="encoded-dots"),
    pytest.param("resp_x\n", id="newline"),
]


@pytest.mark.parametrize("odd", ODD_IDS)
async def test_an_odd_id_is_a_4xx_on_every_route(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path, odd: str
) -> None:
    """Body fields: a 400 naming the field, nothing sent upstream. Path ids: a 400 (the guard's for dot
    segments); the query's ``after`` is an item id that matches nothing. Never a 500."""
    proxy = await start_proxy(data_dir=tmp_path)
    status, stored = await raw(proxy, "POST", "/responses", body={"model": "m", "input": "hi"})
    assert status == 200, stored
    sent = len(fake_upstream.requests)
    for body, param in (
        ({"model": "m", "input": "hi", "previous_response_id": odd}, "previous_response_id"),
        ({"model": "m", "input": [{"type": "item_reference", "id": odd}]}, "input[0].id"),
    ):
        status, answer = await raw(proxy, "POST", "/responses", body=body)
        assert status == 400 and answer["error"]["param"] == param, answer
        assert answer["error"]["type"] == "invalid_request_error"
    assert len(fake_upstream.requests) == sent
    encoded = quote(odd, safe="", errors="surrogatepass")
    for method, path in (
        ("GET", f"/responses/{encoded}"),
        ("DELETE", f"/responses/{encoded}"),
        ("GET", f"/responses/{encoded}/input_items"),
        ("GET", f"/responses/{stored['id']}/input_items?after={encoded}"),
    ):
        status, answer = await raw(proxy, method, path)
        if "after=" in path:  # an item id to page after: an odd one matches nothing
            assert status == 200 and answer["data"] == [], answer
        else:
            assert status == 400 and answer["error"]["code"] in ("invalid_id", "invalid_path"), (path, answer)
