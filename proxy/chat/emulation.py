"""Emulated tool calling: the I/O loop over upstream attempts (whether to re-ask is ``reasks``' decision).

The upstream is always read as a stream (also for non-streaming clients), so the cut at a tool
block over the limit can close the connection at once and the model server stops generating.

Per attempt: open the upstream stream → decode each payload (``delta``) → pass its text through a
``StopMatcher`` (servers may ignore ``stop``: the format's and the client's stop sequences are
enforced here, see ``stops``) → feed what comes before the first stop to a fresh parser of the
format → hand the events to the ``ResponseBuilder``, which makes the client's chunks → on a cut,
or on a stop sequence once the next payload brings more text, close the upstream. After an attempt
without a valid call, re-ask (bounded by the rule) when the block was malformed and nothing of it
reached the client, or when ``tool_choice`` demanded a call. A demanded call that never comes ends
in ``NoValidToolCall`` (or the text, with the rule's ``on_missing_call: "text"``); a re-ask's
repetition of text the client already has is skipped by the builder. What happened is reported to
metrics once, at the end.

One request must not hold the event loop: a payload's text is parsed in ``PARSE_SLICE`` pieces, and the
upstream stream yields to the loop every few milliseconds of work (``UpstreamStream.pace``), so /healthz
and other requests are served while a fast upstream streams text that is slow to parse.

A plain answer is asked for where no call can help: the model only repeated calls whose results the
history holds (``repeat``), or wrote nothing but a call when none may be made (``answer``); the next
attempts run with the tools withdrawn (``EmulationPlan.answering``). Every text toolshim put into the
conversation (the plan's ``injected`` texts, each re-ask's message) is known to the builder's echo
filter: a small model repeats the last message it was sent, and what it repeats of toolshim's never
reaches the client.

A re-ask must be able to help: it names what was wrong, samples at least the rule's
``reask_temperature``, and an attempt that repeats an earlier one word for word ends the re-asks.
Usage the upstream did not report is counted (``usage.settle_usage``) when the answer carries it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator
from typing import Any

from ..config.rules import ModelRule
from ..constrain.grammars import Constraining
from ..formats import StreamParser, ToolCallEnd, set_thinking
from ..formats.lenient import new_parser
from ..formats.prose import ProseParser
from ..observe.context import RequestInfo
from ..observe.dumps import DumpWriter
from ..observe.metrics import Metrics
from ..observe.redact import REDACTOR
from ..upstream import Upstream, UpstreamStream, open_stream
from ..upstream.delta import decode_payload
from ..wire.errors import NoValidToolCall, UpstreamHTTPError
from ..wire.sse import DONE_BYTES, encode_json
from .attempt import Attempt
from .builder import ResponseBuilder, close_reason
from .chunks import ChunkFactory
from .coverage import NOTHING_UNCOVERED
from .echo import Instructions
from .grounding import names_an_id
from .reasks import missing_call_message, next_reask, unrepaired
from .rewrite import EmulationPlan
from .stops import StopMatcher
from .toldcalls import told_calls
from .usage import AttemptUsage, settle_usage

log = logging.getLogger(__name__)

Chunk = dict[str, Any]

# Characters of one payload's text parsed at a time: the stream yields to the event loop between
# slices (``UpstreamStream.pace``), so one huge event cannot hold the loop for its whole parse.
# Parsers give the same events for any split.
PARSE_SLICE = 2048


class Emulator:
    """One emulated request. ``chunks()`` yields OpenAI chunk dicts, ending with finish (and usage)."""

    def __init__(
        self,
        upstream: Upstream,
        plan: EmulationPlan,
        rule: ModelRule,
        model: str,
        info: RequestInfo,
        metrics: Metrics,
        include_usage: bool,
        dumps: DumpWriter | None = None,
        log_content: bool = False,
        buffered: bool = False,
        constraint: Constraining | None = None,
    ) -> None:
        self.upstream = upstream
        self.plan = plan
        self.rule = rule
        self.info = info
        self.metrics = metrics
        self.include_usage = include_usage
        self.dumps = dumps
        self.constraint = constraint  # the grammar fields, until the upstream rejects them
        self.log_content = log_content and log.isEnabledFor(logging.DEBUG)
        self._pending_start: list[Chunk] = []  # the role chunk, held until there is output
        self._ground_asked = False  # calls that made up their values were asked about (once per request)
        self._made_up: list[ToolCallEnd] = []  # those calls, until the attempt without their tools has ended
        self._off_topic_calls: list[ToolCallEnd] = []  # made-up calls asked about with a plain answer (off topic)
        self._unrepaired_asked = False  # a call the repairs did not mend was followed by a plain-answer attempt
        self.builder: ResponseBuilder[Chunk] = ResponseBuilder(
            ChunkFactory(model=model, legacy_functions=plan.legacy_functions),
            wants_call=plan.wants_call,
            calls_withdrawn=plan.calls_withdrawn,
            stream_arguments=rule.stream_arguments,
            text_before_call=rule.text_before_call,
            buffered=buffered,  # the client reads the answer whole: only the final attempt's text counts
            instructions=Instructions(plan.injected),  # every text toolshim put into the conversation
            tools=plan.parse_tools,
            answered=plan.answered,
            results=plan.latest_results,
            example=plan.worked_example(),
            wrapper_tags=plan.wrapper_tags,
            grounds=plan.grounds,
            unasked=plan.unasked,
            unasked_beside_only=plan.unasked_beside_only,
            folded=plan.folded,
        )
        self.builder.uncovered = plan.uncovered if plan.call_body is not None else NOTHING_UNCOVERED

    async def chunks(self) -> AsyncGenerator[Chunk, None]:
        try:
            async for chunk in self._attempts():
                yield chunk
        finally:
            self._tally()

    async def sse(self) -> AsyncGenerator[bytes, None]:
        """The chunks as SSE events (configured secrets masked), then ``[DONE]``. Made here, not by a
        generator around ``chunks``: every layer between the handler and the upstream is resumed for
        every chunk."""
        try:
            async for chunk in self._attempts():
                data = encode_json(chunk)
                yield REDACTOR.redact_bytes(data) if REDACTOR.active else data
        finally:
            self._tally()
        yield DONE_BYTES

    def _tally(self) -> None:
        """The request's emulation figures, however it ended."""
        self.metrics.record_emulation(self.info.model, self.plan.format.name, self.builder.tally)
        self.info.tool_calls += self.builder.tally.calls
        self.info.parse_outcome = self.builder.tally.parse_outcome or self.info.parse_outcome

    async def _attempts(self) -> AsyncGenerator[Chunk, None]:
        extra: list[dict[str, Any]] = []
        repairs_left, required_left = self.rule.max_repair_retries, self.rule.max_required_retries
        attempt_no = 0
        spent: list[AttemptUsage] = []
        seen: set[str] = set()  # each attempt's text, whitespace aside: a repeat ends the re-asks
        # Nothing is sent before there is output: a demanded call that never comes is an error, and
        # an upstream that fails (or sends no first token in time) before it is an HTTP status.
        self._pending_start = self.builder.start()
        while True:
            attempt = Attempt(can_repair=repairs_left > 0)
            body = self._body(extra, attempt_no)
            upstream_stream = await self._open(body)
            try:
                async for chunk in self._read(upstream_stream, attempt):
                    yield chunk
            finally:
                await upstream_stream.aclose()
            for chunk in self._emit(self._first_call_stands(attempt)):
                yield chunk
            for chunk in self._emit(self._insisted_call(attempt)):
                yield chunk
            if not self._stop_reading(attempt):  # else a repair follows: the open text goes with the attempt
                for chunk in self._emit(self.builder.end_attempt()):
                    yield chunk
            for chunk in self._emit(self._calls_told_as_results(attempt)):
                yield chunk
            spent.append(AttemptUsage(body["messages"], "".join(attempt.raw), attempt.usage))
            await self._record_attempt(attempt_no, attempt)
            reask = next_reask(
                self.plan, self.builder, attempt, repairs_left > 0, required_left > 0, self._ground_asked
            )
            if reask is None or (not attempt.unasked and self._repeated(attempt, seen)):
                # an unasked call written again is asked for a plain answer: another request, not a repeat
                reask = None if self._unrepaired_asked else unrepaired(self.plan, self.builder, self.rule, attempt)
                if reask is None:
                    break
                self._unrepaired_asked = True
            reason, message = reask
            repairs_left -= reason in ("repair", "empty", "answer", "call", "more", "placeholder")
            if reason == "ground":
                self._withhold(attempt)
                seen.clear()  # another request (without those tools): the same text there may be asked about again
            if reason == "placeholder":
                self.builder.gate.trust_placeholders()
                self._leave_example_out()
            required_left -= reason == "required"
            self.metrics.record_reask(self.info.model, reason)
            # a call written again while the question still names what no result covers: asked once for the call
            asking_call = reason in ("repeat", "more") and self.plan.call_body is not None
            answering = reason in ("answer", "repeat") and not asking_call
            if asking_call:
                self.plan = self.plan.calling()
                self.builder.uncovered = NOTHING_UNCOVERED  # asked once: what the model writes next stands
                seen.clear()  # another request: the same call written again there is asked for an answer
            if answering:
                self._answer_plainly()
            same_question = reason in ("ground", "placeholder") or asking_call
            if same_question or (answering and self.plan.folded and self.plan.results):
                # the same question (without the made-up call's tool for ``ground``), or the answering plan's folded
                # history (it ends asking for an answer from the results): the attempt (a call the model would copy
                # again) and a message about it are left out
                extra, message = [], ""
            elif answering and attempt.malformed:  # calls that could not be made are left out: they would be copied
                extra = [{"role": "user", "content": message}]
            else:
                extra += [
                    {"role": "assistant", "content": "".join(attempt.parsed)},
                    {"role": "user", "content": message},
                ]
            self.builder.begin_reask(message)
            attempt_no += 1
        await self._settle_usage(spent)
        self.info.note_usage(self.builder.usage)
        if self.plan.wants_call and not self.builder.calls_sent and self.rule.on_missing_call == "error":
            raise NoValidToolCall(missing_call_message(self.plan, attempt_no))
        for chunk in self._emit(self.builder.finish(attempt, self.include_usage)):
            yield chunk

    def _leave_example_out(self) -> None:
        """The next attempts' instructions leave out the worked example whose placeholder a call copied (shown it
        again, a small model copies it again)."""
        if self.plan.unexampled is not None:
            self.plan = self.plan.unexampled()

    def _answer_plainly(self) -> None:
        """The next attempts answer in text: the tools withdrawn, calls written anyway withheld."""
        self.plan = self.plan.answering()
        self.constraint = None  # the grammar was the tools'
        self.builder.withdraw_calls()

    def _withhold(self, attempt: Attempt) -> None:
        """The next attempt asks the same question without the tools of the calls whose values were made
        up: the model calls the tool that gives the value (a grounded call is taken), or, with nothing better,
        its first call stands (``_first_call_stands``: "the weather in the capital of Japan" is Tokyo's). The
        same for calls after tool results of tools the question does not ask for (``unasked``), but those never
        stand: what the model says instead answers. A made-up call when the question shares no word with any
        tool offered ("What is the capital of France?" → the weather in Paris) asks for a plain answer instead:
        the question needs no tool."""
        self._ground_asked = True
        names = frozenset(event.name for event, _ in attempt.ungrounded) | frozenset(attempt.unasked)
        if self.plan.off_topic:
            self.builder.gate.trust_arguments()
            self._off_topic_calls = self._may_stand(attempt)
            self._answer_plainly()
        elif self.plan.narrowed is not None:
            unasked = self.plan.unasked
            self._made_up = [event for event in self._may_stand(attempt) if event.name not in unasked]
            self.plan = self.plan.narrowed(names)
            # its text is held: it is dropped should the first call stand (an unasked call never stands: the
            # text answers)
            self.builder.wants_call = bool(self._made_up)

    def _may_stand(self, attempt: Attempt) -> list[ToolCallEnd]:
        """The made-up calls that may stand for want of a better one: not one that copies the worked example's
        filler (``get_weekday(date="...")`` for "How many legs does a spider have?"), nor one with an id nobody
        gave (``reserve_table(restaurant_id="1234567890")``: a made-up id names another's order or booking, or
        nothing; a name derived from what the model knows may be right)."""
        return [
            event
            for event, missing in attempt.ungrounded
            if not self.builder.gate.copies_placeholder(event) and not names_an_id(missing)
        ]

    def _first_call_stands(self, attempt: Attempt) -> list[Chunk]:
        """After the attempt without the made-up calls' tools: with no grounded call in it, the made-up
        calls are returned as first written (what the attempt said instead is dropped where still held). An
        attempt that wrote a broken call instead (``battery_level`` where ``list_devices`` was offered) is
        repaired first, while repairs are left: the call it meant may be the one that gives the value."""
        if not self._made_up or (attempt.malformed and attempt.can_repair and not self.builder.calls_sent):
            return []  # a broken call in the attempt without them (a tool it made up): its repair comes first
        made_up, self._made_up = self._made_up, []
        self.builder.gate.trust_arguments()
        self.builder.wants_call = self.plan.wants_call
        if self.builder.calls_sent:
            return []
        self.builder.drop_held_text()
        attempt.ungrounded.clear()
        return self.builder.feed(list(made_up), Attempt())  # not cut by the attempt's own second call

    def _insisted_call(self, attempt: Attempt) -> list[Chunk]:
        """Asked for a plain answer because the question shares no word with any tool, the model wrote nothing
        but a call again (withheld): the word match missed ("a house to buy" and ``Homes_FindHomeByArea``), and
        its first call stands rather than an answer that says there is none."""
        calls, self._off_topic_calls = self._off_topic_calls, []
        builder = self.builder
        if not calls or not attempt.withheld or builder.has_answer():
            return []
        builder.allow_calls()
        return builder.feed(list(calls), Attempt())

    def _calls_told_as_results(self, attempt: Attempt) -> list[Chunk]:
        """An attempt that wrote nothing but lines of folded results, one of them with a call the conversation
        has not made and a result made up (``get_weather({"city": "Tokyo"}) returned: ...``): the call it means
        (toldcalls.py). The lines never reach the client; beside an answer, a made-up line is no call."""
        plan, builder = self.plan, self.builder
        if not plan.folded or not plan.tools or builder.calls_withdrawn or builder.has_answer(earlier=False):
            return []
        told = told_calls("".join(attempt.raw), plan.tools, plan.made_calls, plan.max_calls)
        return builder.feed(list(told), attempt) if told else []

    async def _open(self, body: dict[str, Any]) -> UpstreamStream:
        """The upstream stream, constrained where a grammar applies; a constraint the upstream
        refuses (400/422 naming it) is dropped, remembered for the upstream, and the request sent again."""
        constraint = self.constraint
        if constraint is None:
            return await open_stream(self.upstream, body, self.rule.first_token_timeout)
        try:
            return await open_stream(self.upstream, {**body, **constraint.fields}, self.rule.first_token_timeout)
        except UpstreamHTTPError as err:
            if not constraint.rejected(err.status, err.message):
                raise
            log.warning("upstream %s refused the decoding constraint (%s): sent without it", self.upstream.name, err)
            self.constraint = None
            constraint.on_rejected()
            return await open_stream(self.upstream, body, self.rule.first_token_timeout)

    async def _settle_usage(self, spent: list[AttemptUsage]) -> None:
        """The answer's usage: the upstream's, else counted (only when the answer carries usage)."""
        if not self.include_usage:
            for attempt in spent:
                self.builder.add_usage(attempt.reported)
            return
        usage, source = await settle_usage(self.upstream, str(self.plan.body.get("model", "")), spent)
        self.builder.add_usage(usage)
        self.info.usage_source = source
        self.metrics.record_usage_source(self.info.model, source)

    def _repeated(self, attempt: Attempt, seen: set[str]) -> bool:
        """This attempt wrote what an earlier one did: asking again would only repeat it again."""
        text = " ".join("".join(attempt.raw).split())
        if text in seen:
            log.info("the model repeated an earlier attempt word for word: no more re-asks")
            return True
        seen.add(text)
        return False

    def _body(self, extra: list[dict[str, Any]], attempt_no: int) -> dict[str, Any]:
        body = {
            **self.plan.body,
            "messages": [*self.plan.body["messages"], *extra],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        floor, temperature = self.rule.reask_temperature, body.get("temperature")
        if attempt_no and floor is not None and isinstance(temperature, int | float) and temperature < floor:
            body["temperature"] = floor  # greedy decoding would give the same answer again
        if self.log_content and not extra:
            log.debug("rendered prompt: %s", json.dumps(body["messages"], ensure_ascii=False))
        return body

    def _new_parser(self) -> StreamParser:
        """The format's parser; for a turn without tools, one that reads only text and thinking."""
        if self.plan.text_only:
            return ProseParser()
        return new_parser(self.plan.format, list(self.plan.parse_tools), self.plan.max_calls, self.plan.lenient)

    async def _read(self, upstream_stream: UpstreamStream, attempt: Attempt) -> AsyncGenerator[Chunk, None]:
        parser = set_thinking(self._new_parser(), self.rule.thinking)
        stops = StopMatcher(self.plan.stops)
        async for payload in upstream_stream:
            delta = decode_payload(payload)
            attempt.usage = dict(delta.usage) if delta.usage else attempt.usage
            if stops.hit is not None:
                if delta.content or delta.reasoning:
                    return  # the server ignored ``stop`` and goes on: close the connection so generation stops
                continue  # only the finish / usage a server that honoured ``stop`` would have sent
            attempt.finish = delta.finish_reason or attempt.finish
            out = self.builder.reasoning(delta.reasoning) if delta.reasoning else []
            if delta.content:
                attempt.raw.append(delta.content)  # as received (the dump shows what the server ignored)
                attempt.chunks += 1
            text = stops.feed(delta.content) if delta.content else ""
            for at in range(0, len(text), PARSE_SLICE):  # a huge payload is parsed in slices, pacing between
                if at:
                    await upstream_stream.pace()
                out += self._parse(parser, text[at : at + PARSE_SLICE], attempt)
            if stops.hit is not None:  # end the turn there, as if the server had honoured ``stop``
                attempt.finish = "stop"
                self.metrics.record_stop_enforced(self.info.model, self.plan.format.name, self._tokens_saved(attempt))
                out += self.builder.feed(parser.close("stop"), attempt)
            for chunk in self._emit(out):
                yield chunk
            if attempt.cut or self._stop_reading(attempt):
                return
        if stops.hit is None:
            out = self._parse(parser, stops.flush(), attempt)
            out += self.builder.feed(parser.close(close_reason(attempt.finish)), attempt)
            for chunk in self._emit(out):
                yield chunk

    def _parse(self, parser: StreamParser, text: str, attempt: Attempt) -> list[Chunk]:
        """Model text (already cut at a stop sequence) through the parser into the builder."""
        if not text:
            return []
        attempt.parsed.append(text)
        return self.builder.feed(parser.feed(text), attempt)

    def _emit(self, chunks: list[Chunk]) -> list[Chunk]:
        if self.builder.produced_output and self.info.first_token is None:
            self.info.mark_first_token()
        if chunks and self._pending_start:
            chunks, self._pending_start = [*self._pending_start, *chunks], []
        return chunks

    def _stop_reading(self, attempt: Attempt) -> bool:
        """Stop early when this attempt can only end in a re-ask or an abandoned call."""
        if attempt.abandoned_call:
            return True
        if not attempt.malformed or self.builder.calls_withdrawn:
            return False
        return attempt.can_repair and self.builder.calls_sent == 0 and not attempt.calls

    async def _record_attempt(self, attempt_no: int, attempt: Attempt) -> None:
        """Metrics for a cut, the raw text at DEBUG (``log_content``), the dump file."""
        if attempt.cut:
            self.metrics.record_cut(self.info.model, self.plan.format.name, self._tokens_saved(attempt))
        if self.log_content:
            log.debug("model text (attempt %d): %s", attempt_no, "".join(attempt.raw))
        if self.dumps is not None:
            notes = [
                f"# model={self.info.model} format={self.plan.format.name} finish={attempt.finish} "
                f"calls={attempt.calls} cut={attempt.cut}"
            ]
            notes += [f"# malformed: {m.reason}" for m in attempt.malformed]
            await self.dumps.write(attempt_no, notes, "".join(attempt.raw), self.info.request_id)

    def _tokens_saved(self, attempt: Attempt) -> int:
        """Tokens the cut spared, when the request named a limit (chunks stand in for tokens)."""
        max_tokens = self.plan.body.get("max_completion_tokens") or self.plan.body.get("max_tokens")
        return max(max_tokens - attempt.chunks, 0) if isinstance(max_tokens, int) else 0
