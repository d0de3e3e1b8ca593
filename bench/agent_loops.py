"""Whole agent loops, run by real frameworks' own loops through toolshim, judged on their final answer.

``python bench/agent_loops.py`` (``make bench-loops``) starts the llama.cpp server with
Qwen2.5-Coder-0.5B-Instruct, a toolshim serving ``--rules`` (``demo/rules.json5`` by default: pythonic,
``tool_order: relevance``, ``offer_tools: related``), and two recording relays, one on each side of it:

    framework's loop -> relay (client side) -> toolshim -> relay (upstream side) -> llama.cpp server

Then it runs every task of ``bench/loop_tasks.py`` (multi-step questions with deterministic tools, one
that needs no tool, one that needs two independent calls) through every loop of ``bench/loop_clients.py``
(the OpenAI SDK plain and streamed, LangGraph, the Agents SDK over Chat Completions and over the
Responses API, pydantic-ai, LlamaIndex), each with its framework's own round cap (``--max-rounds``) and a
time cap (``--loop-timeout``); no repeat guard or retry of ours. Per loop it records:

* ``correct``: the loop ended in an answer within its caps, the executed calls pass the task's checks (the
  right tool with the right arguments ran; a distractor such as ``cancel_order`` did not), the answer has
  the numbers or keywords the results lead to, and it is clean (below);
* ``markup``: raw call markup in the final answer: every format's (``bench/hygiene.py``: ``<tool_call>``,
  ``[get_weather(``, ``Action:``, ``<function=``, a ``{"name": ...`` object, a tag named after a tool), a
  bare ``get_weather(city=...)`` call, or a tool name alone on a line followed by ``key: value`` lines;
* ``toolshim text``: the answer repeats a run of 6 words that toolshim itself wrote into what it sent
  upstream (its tool instructions, its re-ask and policy phrases), found generically: the word runs of the
  system and user messages on the upstream side that occur in nothing the client sent;
* ``error``: the framework raised (an HTTP error included); ``capped``/``timeout``: no answer in time;
* rounds (model requests the client made), upstream requests (re-asks included), tokens (``usage`` of the
  upstream answers, else of the client's), seconds.

It prints a table per framework x task and totals per framework and overall, and writes every loop, with
its transcript (what the model wrote upstream, what the client got each round), to ``--json``.
``--set KEY=VALUE`` changes the served rule (``--set tool_mode=hermes --set constrained=true``; a
``upstream.`` prefix changes its upstream, ``--set upstream.constraint_dialect=gbnf``), to compare
configurations; ``--frameworks``, ``--tasks`` and ``--repeat`` pick what runs.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import datetime
import fnmatch
import json
import logging
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import json5

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/agent_loops.py` puts bench/ on the path, not the repo root
    sys.path.insert(0, str(ROOT))

from bench.charts import bar_chart  # noqa: E402
from bench.hygiene import ECHO_WORDS, markup_pattern, without_code  # noqa: E402
from bench.loop_clients import FRAMEWORKS, LANGGRAPH_OUT_OF_STEPS, LoopContext, LoopEnd  # noqa: E402
from bench.loop_tasks import (  # noqa: E402
    EIGHTH,
    ELEVENTH,
    FIFTH,
    FOURTH,
    FRESH,
    HELD_OUT,
    NINTH,
    SEVENTH,
    SIXTH,
    TASKS,
    TASKS_BY_NAME,
    TENTH,
    THIRTEENTH,
    TOOLS,
    TWELFTH,
    UNSEEN,
    Call,
    Task,
    Toolbox,
)
from scripts import local_stack  # noqa: E402
from scripts.local_model import LocalModelError  # noqa: E402
from tests.realmodel.recorder import Exchange, RecordingRelay  # noqa: E402

DEFAULT_RULES = ROOT / "demo" / "rules.json5"
CODES = {
    "ok": "✓",
    "error": "E",
    "timeout": "T",
    "capped": "C",
    "markup": "M",
    "toolshim_text": "S",
    "empty": "0",
    "wrong_calls": "W",
    "raw_result": "J",
    "wrong_answer": "A",
}
LEGEND = (
    "✓ correct   E error   T time cap   C round cap   M markup in the answer   S toolshim's text in the answer   "
    "0 empty answer   W wrong or missing calls   J a bare JSON value (a tool result handed on) as the answer   "
    "A answer lacks the result"
)


# ---- the relays: timed records of both sides ---------------------------------------------------


class TimedExchanges(list[Exchange]):
    """The relay's record, with the moment each exchange began (to pair upstream requests with rounds)."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[float] = []

    def append(self, exchange: Exchange) -> None:
        self.started.append(time.monotonic())
        super().append(exchange)

    def clear(self) -> None:
        self.started.clear()
        super().clear()


class TimedRelay(RecordingRelay):
    """The recording relay, with the start of each exchange and a count of those still in flight."""

    def __init__(self, upstream_root: str) -> None:
        super().__init__(upstream_root)
        self.exchanges: TimedExchanges = TimedExchanges()
        self.in_flight = 0

    async def _relay(self, request: Any) -> Any:
        self.in_flight += 1
        try:
            return await super()._relay(request)
        finally:
            self.in_flight -= 1

    async def settle(self, timeout: float) -> None:
        """Wait until no exchange is in flight: a loop cut at its time cap leaves its request running, and
        the model server finishes it before it takes the next (llama.cpp's server does not stop a request
        whose client left), so the next loop starts on an idle server with a clean record."""
        deadline = time.monotonic() + timeout
        while self.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.2)


def timed_relay(upstream_root: str) -> TimedRelay:
    relay = TimedRelay(upstream_root)
    relay.start()
    return relay


def payloads(exchange: Exchange) -> list[dict[str, Any]]:
    """The JSON objects of an answer: its body, or every SSE ``data:`` event."""
    text = exchange.raw.decode("utf-8", errors="replace")
    if not text.strip():
        return []
    if not text.lstrip().startswith(("data:", "event:")):
        with contextlib.suppress(ValueError):
            body = json.loads(text)
            return [body] if isinstance(body, dict) else []
        return []
    found: list[dict[str, Any]] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
            with contextlib.suppress(ValueError):
                event = json.loads(line[5:])
                if isinstance(event, dict):
                    found.append(event)
    return found


def usage_tokens(exchange: Exchange) -> int | None:
    """Total tokens of an answer's ``usage`` (Chat Completions or Responses), None without one."""
    total = None
    for payload in payloads(exchange):
        usage = payload.get("usage")
        response = payload.get("response")
        if usage is None and isinstance(response, dict):
            usage = response.get("usage")
        if isinstance(usage, dict):
            tokens = usage.get("total_tokens")
            if tokens is None:
                parts = [usage.get(k) for k in ("prompt_tokens", "completion_tokens", "input_tokens", "output_tokens")]
                tokens = sum(p for p in parts if isinstance(p, int)) or None
            total = tokens if isinstance(tokens, int) else total
    return total


def client_view(exchange: Exchange) -> dict[str, Any]:
    """What the client got in one round: text and calls, from either API, streamed or not."""
    text: list[str] = []
    calls: dict[str, list[str]] = {}
    for payload in payloads(exchange):
        if payload.get("object") == "chat.completion":
            message = (payload.get("choices") or [{}])[0].get("message") or {}
            text.append(message.get("content") or "")
            for i, call in enumerate(message.get("tool_calls") or []):
                calls[str(i)] = [call["function"]["name"], call["function"].get("arguments") or ""]
        elif payload.get("object") == "chat.completion.chunk":
            for choice in payload.get("choices") or []:
                delta = choice.get("delta") or {}
                text.append(delta.get("content") or "")
                for part in delta.get("tool_calls") or []:
                    entry = calls.setdefault(str(part.get("index")), ["", ""])
                    function = part.get("function") or {}
                    entry[0] += function.get("name") or ""
                    entry[1] += function.get("arguments") or ""
        elif payload.get("object") == "response" or payload.get("type") == "response.completed":
            response = payload if payload.get("object") == "response" else payload.get("response") or {}
            for item in response.get("output") or []:
                if item.get("type") == "message":
                    text += [part.get("text") or "" for part in item.get("content") or []]
                elif item.get("type") == "function_call":
                    calls[item.get("call_id", str(len(calls)))] = [item.get("name", ""), item.get("arguments", "")]
        elif "error" in payload:
            text.append(f"[error] {json.dumps(payload['error'])[:300]}")
    return {"status": exchange.status, "text": "".join(text), "calls": [f"{n}({a})" for n, a in calls.values()]}


# ---- judging the answer ------------------------------------------------------------------------

_WORD = re.compile(r"[^\W_]+")


def word_runs(text: str, size: int = ECHO_WORDS) -> set[tuple[str, ...]]:
    words = [w.casefold() for w in _WORD.findall(text)]
    return {tuple(words[i : i + size]) for i in range(len(words) - size + 1)}


def strings_in(value: Any) -> Iterable[str]:
    """Every string leaf of a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)


def message_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(strings_in(content)) if content else ""


def call_words(tools: Iterable[Mapping[str, Any]]) -> set[str]:
    """The words of tool definitions, and ``name``/``arguments``/``parameters``: what a call is made of."""
    words = {w.casefold() for tool in tools for w in _WORD.findall(json.dumps(tool))}
    return words | {"name", "arguments", "parameters"}


PARAPHRASE = 0.4  # share of an answer's word trigrams that toolshim alone wrote, for a paraphrase of its text


CALL_WORDS = call_words(tool.openai() for tool in TOOLS.values())


def texts_sent(client: Sequence[Exchange], upstream: Sequence[Exchange]) -> tuple[list[str], list[str]]:
    """Distinct texts: every string of the client's requests (its prompts, its tool definitions, the results
    it sent); every system and user message toolshim sent upstream (its instructions and re-asks among them)."""
    client_texts = list(dict.fromkeys(s for ex in client for s in strings_in(ex.request)))
    upstream_texts = list(
        dict.fromkeys(
            message_text(m)
            for ex in upstream
            for m in ex.request.get("messages") or []
            if m.get("role") in ("system", "user")
        )
    )
    return client_texts, upstream_texts


def toolshim_only(
    client_texts: Sequence[str], upstream_texts: Sequence[str], words: set[str], size: int
) -> set[tuple[str, ...]]:
    """The ``size``-word runs of what toolshim sent upstream that occur in nothing the client sent, and are
    not made only of tool and parameter names (a call the model wrote, rendered back into the history)."""
    sent = set().union(*(word_runs(t, size) for t in client_texts))
    own = set().union(*(word_runs(t, size) for t in upstream_texts))
    return {run for run in own - sent if not words.issuperset(run)}


def toolshim_text_in(
    answer: str, client_texts: Sequence[str], upstream_texts: Sequence[str], words: set[str]
) -> list[str]:
    """toolshim's own text in the answer: a run of ``ECHO_WORDS`` words of it, or a paraphrase (at least
    ``PARAPHRASE`` of the answer's word trigrams, and 4, are toolshim's alone: "The calculator did not give
    a different result when called 3 times in a row." after its repeated-call instruction)."""
    runs = word_runs(answer) & toolshim_only(client_texts, upstream_texts, words, ECHO_WORDS)
    if runs:  # not five words the client sent and one word beside them ('... 10 minutes late" returned a')
        sent = set().union(*(word_runs(t, ECHO_WORDS - 1) for t in client_texts))
        runs = {run for run in runs if run[1:] not in sent and run[:-1] not in sent}
    if runs:
        return sorted(" ".join(run) for run in runs)
    mine = word_runs(answer, 3)
    shared = mine & toolshim_only(client_texts, upstream_texts, words, 3)
    if len(shared) >= 4 and len(shared) >= PARAPHRASE * len(mine):
        return ["paraphrase: " + " / ".join(sorted(" ".join(t) for t in shared))]
    return []


def markup_in_answer(answer: str, tool_names: Sequence[str]) -> list[str]:
    """Raw call markup in the answer: every format's, bare ``name(key=`` calls, a ``[name, args]`` list,
    ``name`` + ``key:`` lines."""
    text = without_code(answer)
    found = [m.group(0) for m in markup_pattern(tool_names).finditer(text)]
    names = "|".join(re.escape(n) for n in sorted(tool_names, key=len, reverse=True))
    found += [m.group(0) for m in re.finditer(rf"\b(?:{names})\s*\(\s*\w+\s*=", text)]
    found += [m.group(0) for m in re.finditer(rf"\[\s*(?:{names})\s*,", text)]
    found += [m.group(0) for m in re.finditer(rf"(?m)^\s*(?:{names})\s*:?\s*\n\s*\w+\s*[:=]", text)]
    return found


@dataclass(slots=True)
class LoopRecord:
    """One loop's outcome, as printed and written to the JSON file."""

    framework: str
    task: str
    repeat: int
    kind: str = "ok"
    correct: bool = False
    answer: str = ""
    problems: list[str] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    markup: list[str] = field(default_factory=list)
    toolshim_text: list[str] = field(default_factory=list)
    error: str | None = None
    rounds: int = 0
    upstream_requests: int = 0
    tokens: int | None = None
    client_tokens: int | None = None
    seconds: float = 0.0
    http_errors: list[str] = field(default_factory=list)
    transcript: list[dict[str, Any]] = field(default_factory=list)
    system_prompt: str = ""
    client_texts: list[str] = field(default_factory=list)
    upstream_texts: list[str] = field(default_factory=list)


def judge(record: LoopRecord, task: Task, end: LoopEnd | None, box: Toolbox) -> None:
    """Fill in the record's verdict: the failure kind (the first that applies) or ``ok``."""
    record.calls = [str(call) for call in box.calls]
    call_problems: list[str] = []
    answer_problems: list[str] = []
    if end is not None and not end.capped:
        for problem in task.judge(end.answer, box.calls):
            (answer_problems if problem.startswith("answer") else call_problems).append(problem)
    record.problems = call_problems + answer_problems
    if record.error is not None:
        record.kind = "timeout" if record.error.startswith("time cap") else "error"
    elif end is None or end.capped:
        record.kind = "capped"
    elif record.markup:
        record.kind = "markup"
    elif record.toolshim_text:
        record.kind = "toolshim_text"
    elif not end.answer.strip():
        record.kind = "empty"
    elif call_problems:
        record.kind = "wrong_calls"
    elif any(p.startswith("answer is a bare JSON") for p in answer_problems):
        record.kind = "raw_result"
    elif answer_problems:
        record.kind = "wrong_answer"
    record.correct = record.kind == "ok"


def transcript(client: TimedExchanges, upstream: TimedExchanges) -> list[dict[str, Any]]:
    """Per client round: what toolshim asked upstream last, what the model wrote, what the client got."""
    rounds: list[dict[str, Any]] = []
    for exchange in client:
        view = client_view(exchange)
        rounds.append({"path": exchange.path, "client_got": view, "upstream": []})
    for j, exchange in enumerate(upstream):
        i = bisect.bisect_right(client.started, upstream.started[j]) - 1
        if 0 <= i < len(rounds):
            messages = exchange.request.get("messages") or [{}]
            rounds[i]["upstream"].append(
                {
                    "last_message": {
                        "role": messages[-1].get("role"),
                        "content": message_text(messages[-1])[-800:],
                    },
                    "tool_choice_none": "stop" not in exchange.request,
                    "began_s": round(upstream.started[j] - client.started[0], 1),
                    "model_wrote": exchange.text(),
                    "finish_reason": exchange.finish_reason(),
                }
            )
    return rounds


# ---- running -----------------------------------------------------------------------------------


@dataclass(slots=True)
class Bench:
    """The running stack: where clients go, the two relays, the settings of every loop."""

    base_url: str
    model: str
    client_relay: TimedRelay
    upstream_relay: TimedRelay
    max_rounds: int
    max_tokens: int | None
    loop_timeout: float
    request_timeout: float = 300.0


async def run_loop(bench: Bench, framework: str, task: Task, repeat: int = 0) -> LoopRecord:
    """One task through one framework's loop, judged."""
    bench.client_relay.clear()
    bench.upstream_relay.clear()
    box = Toolbox()
    record = LoopRecord(framework, task.name, repeat)
    ctx = LoopContext(bench.base_url, bench.model, task, box, bench.max_rounds, bench.max_tokens, bench.request_timeout)
    end: LoopEnd | None = None
    began = time.monotonic()
    try:
        end = await asyncio.wait_for(FRAMEWORKS[framework](ctx), timeout=bench.loop_timeout)
    except TimeoutError:
        record.error = f"time cap: no answer within {bench.loop_timeout:.0f} s"
    except Exception as exc:
        record.error = f"{type(exc).__name__}: {str(exc)[:500]}"
    record.seconds = round(time.monotonic() - began, 2)
    await bench.client_relay.settle(bench.loop_timeout)
    await bench.upstream_relay.settle(bench.loop_timeout)
    client = list(bench.client_relay.exchanges)
    upstream = list(bench.upstream_relay.exchanges)
    record.rounds = len(client)
    record.upstream_requests = len(upstream)
    record.client_tokens = _summed(usage_tokens(ex) for ex in client)
    record.tokens = _summed(usage_tokens(ex) for ex in upstream) or record.client_tokens
    record.http_errors = [f"{ex.status} {ex.raw[:200].decode(errors='replace')}" for ex in client if ex.status >= 400]
    record.client_texts, record.upstream_texts = texts_sent(client, upstream)
    record.transcript = transcript(bench.client_relay.exchanges, bench.upstream_relay.exchanges)
    if upstream:
        first = (upstream[0].request.get("messages") or [{}])[0]
        record.system_prompt = message_text(first) if first.get("role") == "system" else ""
    if end is not None:
        record.answer = end.answer
        names = sorted(TOOLS)
        record.markup = markup_in_answer(end.answer, names)
        record.toolshim_text = toolshim_text_in(end.answer, record.client_texts, record.upstream_texts, CALL_WORDS)
    judge(record, task, end, box)
    return record


def rejudge(path: Path) -> str:
    """Judge the loops of a results file again with the current checks (no model needed); rewrite it."""
    data = json.loads(path.read_text(encoding="utf-8"))
    records = [LoopRecord(**raw) for raw in data["loops"]]
    for record in records:
        box = Toolbox([Call(c[: c.index("(")], json.loads(c[c.index("(") + 1 : -1])) for c in record.calls])
        capped = record.kind == "capped" or record.answer == LANGGRAPH_OUT_OF_STEPS
        end = None if record.error else LoopEnd(capped=True) if capped else LoopEnd(record.answer)
        if end is not None and not end.capped:
            record.markup = markup_in_answer(end.answer, sorted(TOOLS))
            if record.upstream_texts:
                record.toolshim_text = toolshim_text_in(
                    end.answer, record.client_texts, record.upstream_texts, CALL_WORDS
                )
        record.kind, record.problems = "ok", []
        judge(record, TASKS_BY_NAME[record.task], end, box)
    frameworks = list(dict.fromkeys(r.framework for r in records))
    tasks = [TASKS_BY_NAME[name] for name in dict.fromkeys(r.task for r in records)]
    data["table"] = tables(records, frameworks, tasks)
    data["loops"] = [asdict(r) for r in records]
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return str(data["table"])


def _summed(values: Iterable[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def short(text: str, width: int = 90) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


async def run_all(
    bench: Bench,
    frameworks: Sequence[str],
    tasks: Sequence[Task],
    repeat: int,
    quiet: bool = False,
    save: Path | None = None,
    done: Sequence[LoopRecord] = (),
) -> list[LoopRecord]:
    """Every task through every loop, ``repeat`` times, but those ``done`` already (kept first);
    ``save``: every record so far, after each loop (what ``--resume`` reads)."""
    records = list(done)
    finished = {(r.framework, r.task, r.repeat) for r in done}
    for r in range(repeat):
        for task in tasks:
            for framework in frameworks:
                if (framework, task.name, r) in finished:
                    continue
                record = await run_loop(bench, framework, task, r)
                records.append(record)
                if save is not None:
                    save.write_text(json.dumps({"partial": True, "loops": [asdict(x) for x in records]}, indent=1))
                if not quiet:
                    detail = record.error or "; ".join(record.problems) or short(record.answer)
                    print(
                        f"  {CODES[record.kind]} {task.name:<13} {framework:<17} {record.rounds} rounds "
                        f"{record.seconds:6.1f} s  {short(detail)}",
                        flush=True,
                    )
    return records


# ---- tables ------------------------------------------------------------------------------------


def cell(records: Sequence[LoopRecord]) -> str:
    if len(records) == 1:
        return CODES[records[0].kind]
    return f"{sum(r.correct for r in records)}/{len(records)}"


def pct(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f}%)" if whole else "-"


def median(values: Iterable[float | int | None]) -> str:
    known = [v for v in values if v is not None]
    return f"{statistics.median(known):g}" if known else "-"


def tables(records: Sequence[LoopRecord], frameworks: Sequence[str], tasks: Sequence[Task]) -> str:
    """The framework x task table, then the totals per framework and overall (Markdown)."""
    lines = ["| framework | " + " | ".join(t.name for t in tasks) + " | correct |", "|---" * (len(tasks) + 2) + "|"]
    for fw in frameworks:
        mine = [r for r in records if r.framework == fw]
        cells = [cell([r for r in mine if r.task == t.name]) for t in tasks]
        lines.append(f"| {fw} | " + " | ".join(cells) + f" | {pct(sum(r.correct for r in mine), len(mine))} |")
    lines += ["", LEGEND, ""]
    needs = {t.name for t in tasks if t.needs_tool}
    header = (
        "| framework | correct | tool tasks correct | no-tool correct | round/time cap | markup | toolshim text "
        "| bare JSON | error | median rounds | median upstream requests | median tokens | median s | total s |"
    )
    lines += [header, "|---" * 14 + "|"]
    for fw in [*frameworks, "all"]:
        mine = [r for r in records if fw in ("all", r.framework)]
        if not mine:
            continue
        tool = [r for r in mine if r.task in needs]
        plain = [r for r in mine if r.task not in needs]
        lines.append(
            f"| {fw} | {pct(sum(r.correct for r in mine), len(mine))} | "
            f"{pct(sum(r.correct for r in tool), len(tool))} | {pct(sum(r.correct for r in plain), len(plain))} | "
            f"{sum(r.kind in ('capped', 'timeout') for r in mine)} | {sum(bool(r.markup) for r in mine)} | "
            f"{sum(bool(r.toolshim_text) for r in mine)} | {sum(r.kind == 'raw_result' for r in mine)} | "
            f"{sum(r.kind == 'error' for r in mine)} | "
            f"{median(r.rounds for r in mine)} | {median(r.upstream_requests for r in mine)} | "
            f"{median(r.tokens for r in mine)} | {median(r.seconds for r in mine)} | "
            f"{sum(r.seconds for r in mine):.0f} |"
        )
    return "\n".join(lines)


def write_chart(svg: Path, results: Path) -> None:
    """The share of correct loops per framework, and over all, of a results file, as an SVG bar chart."""
    data = json.loads(results.read_text(encoding="utf-8"))
    records = data["loops"]
    frameworks = list(dict.fromkeys(r["framework"] for r in records))
    rows = []
    for fw in [*frameworks, "all"]:
        mine = [r for r in records if fw in ("all", r["framework"])]
        rows.append((fw, sum(bool(r["correct"]) for r in mine) / len(mine)))
    meta = data.get("meta", {})
    tasks = len(dict.fromkeys(r["task"] for r in records))
    title = f"Agent loops ending in a correct answer ({len(records)} loops, {tasks} tasks)"
    note = f"{meta.get('label', '')} {meta.get('date', '')}, commit {meta.get('commit', '?')}".strip()
    svg.parent.mkdir(parents=True, exist_ok=True)
    svg.write_text(bar_chart(title, rows, note), encoding="utf-8")


# ---- the stack ---------------------------------------------------------------------------------


def parse_set(items: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``KEY=VALUE`` pairs (values read as JSON5, else as strings): rule options, upstream options."""
    rule: dict[str, Any] = {}
    upstream: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep:
            raise SystemExit(f"--set wants KEY=VALUE, got {item!r}")
        try:
            value = json5.loads(raw)
        except ValueError:
            value = raw
        if key.startswith("upstream."):
            upstream[key.removeprefix("upstream.")] = value
        else:
            rule[key] = value
    return rule, upstream


def load_rules(
    path: Path, model: str | None, sets: Sequence[str], upstream_url: str, upstream_model: str
) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """The rules file, every upstream pointed at the recording relay and every rule at the served model;
    ``--set`` applied to the rule ``model`` matches. Returns the rules, the model name, the rule."""
    rules: dict[str, Any] = json5.loads(path.read_text(encoding="utf-8"))
    for upstream in rules["upstreams"].values():
        upstream["base_url"] = upstream_url
        upstream.pop("api_key_env", None)
    for rule in rules["models"]:
        rule["upstream_model"] = upstream_model
    if model is None:
        model = next(r["match"] for r in rules["models"] if not any(c in r["match"] for c in "*?["))
    rule = next((r for r in rules["models"] if fnmatch.fnmatchcase(model, r["match"])), None)
    if rule is None:
        raise SystemExit(f"no rule in {path} matches the model {model!r}")
    rule_set, upstream_set = parse_set(sets)
    rule.update(rule_set)
    rules["upstreams"][rule["upstream"]].update(upstream_set)
    return rules, model, rule


def commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "proxy"], cwd=ROOT, capture_output=True, text=True
        )
    except OSError:
        return "unknown"
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Real agent loops through toolshim, judged on their final answer.")
    parser.add_argument("--rules", type=Path, default=DEFAULT_RULES, help="rules file (default: %(default)s)")
    parser.add_argument("--model", help="the exposed model name (default: the first rule without a wildcard)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="change the rule (upstream.KEY: its upstream)"
    )
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS), help="comma-separated; default: all")
    parser.add_argument(
        "--tasks",
        default=",".join(t.name for t in TASKS),
        help="comma-separated names, or a later set (held_out, fresh, unseen, fourth ... thirteenth); default: main 9",
    )
    parser.add_argument("--repeat", type=int, default=1, help="run everything this many times")
    parser.add_argument("--max-rounds", type=int, default=8, help="each framework's round cap (model requests)")
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=256,
        help="token cap per model turn; 0: none sent (the rule's max_output_tokens holds)",
    )
    parser.add_argument("--loop-timeout", type=float, default=480.0, help="seconds one loop may take")
    parser.add_argument(
        "--request-timeout", type=float, default=300.0, help="seconds one model request may take (client side)"
    )
    parser.add_argument("--local-model", choices=("qwen", "smollm"), default="qwen", help="the bundled model served")
    parser.add_argument("--upstream", help="use this OpenAI-compatible server instead (with --upstream-model)")
    parser.add_argument("--upstream-model", help="the model name --upstream serves")
    parser.add_argument("--json", type=Path, default=Path("agent-loops.json"), help="results file (%(default)s)")
    parser.add_argument("--label", help="a name for this configuration in the output")
    parser.add_argument(
        "--resume", action="store_true", help="keep the loops --json already holds (same options!), run the rest"
    )
    parser.add_argument("--rejudge", type=Path, help="judge a results file again with the current checks, and stop")
    parser.add_argument("--svg", type=Path, help="also draw the share of correct loops per framework (SVG)")
    args = parser.parse_args(argv)
    args.tasks = args.tasks.replace("held_out", ",".join(t.name for t in HELD_OUT))
    args.tasks = args.tasks.replace("fresh", ",".join(t.name for t in FRESH))
    args.tasks = args.tasks.replace("unseen", ",".join(t.name for t in UNSEEN))
    args.tasks = args.tasks.replace("fourth", ",".join(t.name for t in FOURTH))
    args.tasks = args.tasks.replace("fifth", ",".join(t.name for t in FIFTH))
    args.tasks = args.tasks.replace("sixth", ",".join(t.name for t in SIXTH))
    args.tasks = args.tasks.replace("seventh", ",".join(t.name for t in SEVENTH))
    args.tasks = args.tasks.replace("eighth", ",".join(t.name for t in EIGHTH))
    args.tasks = args.tasks.replace("ninth", ",".join(t.name for t in NINTH))
    args.tasks = args.tasks.replace("tenth", ",".join(t.name for t in TENTH))
    args.tasks = args.tasks.replace("eleventh", ",".join(t.name for t in ELEVENTH))
    args.tasks = args.tasks.replace("twelfth", ",".join(t.name for t in TWELFTH))
    args.tasks = args.tasks.replace("thirteenth", ",".join(t.name for t in THIRTEENTH))
    unknown = set(args.frameworks.split(",")) - set(FRAMEWORKS)
    unknown |= set(args.tasks.split(",")) - set(TASKS_BY_NAME)
    if unknown:
        parser.error(f"unknown framework or task: {', '.join(sorted(unknown))}")
    if bool(args.upstream) != bool(args.upstream_model):
        parser.error("--upstream and --upstream-model go together")
    return args


async def main_async(args: argparse.Namespace) -> int:
    # a relay whose client hung up (toolshim cutting a second call) is logged by aiohttp with a traceback
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    frameworks = args.frameworks.split(",")
    tasks = [TASKS_BY_NAME[name] for name in args.tasks.split(",")]
    began = time.monotonic()
    measured = commit()  # the code the toolshim started below runs: a commit made during the run is not in it
    done: list[LoopRecord] = []
    if args.resume and args.json.exists():
        done = [LoopRecord(**raw) for raw in json.loads(args.json.read_text(encoding="utf-8"))["loops"]]
        wanted = {t.name for t in tasks}
        done = [r for r in done if r.framework in frameworks and r.task in wanted and r.repeat < args.repeat]
        print(f"[setup] {len(done)} loops already in {args.json}; running the others")
    with local_stack.services_stopped_on_exit() as started:
        if args.upstream:
            upstream_root, upstream_model = args.upstream.rstrip("/").removesuffix("/v1"), args.upstream_model
        else:
            print(f"[setup] starting the llama.cpp server ({args.local_model})", flush=True)
            server = local_stack.start_model_server(args.local_model)
            started.append(server)
            upstream_root, upstream_model = server.root, server.model_id
        upstream_relay = timed_relay(upstream_root)
        client_relay: TimedRelay | None = None
        try:
            rules, model, rule = load_rules(args.rules, args.model, args.set, upstream_relay.base_url, upstream_model)
            proxy = local_stack.start_toolshim(rules)
            started.append(proxy)
            client_relay = timed_relay(proxy.root)
            label = args.label or f"{args.rules.name} {model}" + "".join(f" {s}" for s in args.set)
            shown = {k: v for k, v in rule.items() if k not in ("match", "upstream", "upstream_model")}
            print(f"[setup] {label}: rule {json.dumps(shown)}; {len(tasks)} tasks x {len(frameworks)} loops")
            bench = Bench(
                client_relay.base_url,
                model,
                client_relay,
                upstream_relay,
                args.max_rounds,
                args.max_tokens or None,
                args.loop_timeout,
                args.request_timeout,
            )
            records = await run_all(bench, frameworks, tasks, args.repeat, save=args.json, done=done)
        finally:
            for relay in (client_relay, upstream_relay):
                # a loop cut at its time cap may leave a request in flight; the relay's shutdown waits for it
                with contextlib.suppress(TimeoutError):
                    if relay is not None:
                        relay.stop()
    table = tables(records, frameworks, tasks)
    elapsed = time.monotonic() - began
    meta = {
        "date": datetime.date.today().isoformat(),
        "commit": measured,
        "label": label,
        "rules": str(args.rules),
        "model": model,
        "rule": shown,
        "set": args.set,
        "frameworks": frameworks,
        "tasks": [t.name for t in tasks],
        "repeat": args.repeat,
        "max_rounds": args.max_rounds,
        "max_tokens": args.max_tokens,
        "loop_timeout": args.loop_timeout,
        "upstream_model": upstream_model,
        "seconds": round(elapsed, 1),
    }
    args.json.write_text(
        json.dumps({"meta": meta, "table": table, "loops": [asdict(r) for r in records]}, indent=1, ensure_ascii=False)
        + "\n",
        encoding="utf-8",
    )
    print(f"\n{label} ({meta['date']}, commit {meta['commit']}, {elapsed:.0f} s)\n\n{table}\n")
    print(f"[done] every loop, with its transcript, in {args.json}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.rejudge:
        print(rejudge(args.rejudge))
        if args.svg:
            write_chart(args.svg, args.rejudge)
        return 0
    try:
        status = asyncio.run(main_async(args))
        if args.svg and status == 0:
            write_chart(args.svg, args.json)
        return status
    except LocalModelError as exc:
        print(f"[error] {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("[stopped] interrupted; every process started has been stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
