"""Sans-IO response builder: parser events in, one front end's output items out.

The builder owns what makes an emulated answer an OpenAI answer: call ids and client-side
indexes, text held back while a call is demanded, argument fragments that only ever append,
the finish reason (also the deadline's), and the usage added up over re-asks. How the items
look is the ``Renderer``'s business: ``chunks.ChunkFactory`` renders chat-completion chunks;
another front end (the Responses API) plugs in its own renderer and reuses everything else.

What happened is kept as plain facts (``Tally``, ``Attempt``) for the I/O layer to report to
metrics and to decide re-asks; no metrics, clock or I/O in here. Ids come from an injectable
source so tests can be deterministic.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, Protocol, TypeVar, cast

from ..formats import (
    Event,
    Malformed,
    Reasoning,
    SecondToolStarted,
    Text,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
    ToolSpec,
)
from ..formats.base import FinishReason
from ..formats.history import tool_failure
from .attempt import Attempt, Repetition, Tally
from .callids import new_call_id
from .coverage import NOTHING_UNCOVERED
from .echo import MAX_MISSES, SEGMENT_END, EchoFilter, Instructions, ends_outside_brackets
from .example import WorkedExample, opening_at_end
from .gate import CallGate, Verdict
from .grounding import Grounds
from .mentions import WrapperTags
from .plaincalls import PlainCalls, quotes_folded_results, quotes_result_whole, without_quoted_tool_results
from .repeats import call_key
from .toldcalls import tools_talked_about

log = logging.getLogger(__name__)

Item = TypeVar("Item")
Item_co = TypeVar("Item_co", covariant=True)
TextBeforeCall = Literal["content", "reasoning", "drop"]


# the answer when the model gave none (no text, no call, no tool result to show): never toolshim's
# instructions and never a call's words, which a client would keep in its history for the model to copy
NO_ANSWER = "(No answer: the model's reply was empty.)"
NO_ANSWER_CALL = "(No answer: the model replied only with a tool call that could not be made here.)"
FIRST_SENTENCE_CAP = 400  # characters of a streamed answer to results held at most while its first sentence is open


class Renderer(Protocol[Item_co]):
    """One front end's output items (chat chunks, Responses events, ...)."""

    def role(self) -> Item_co: ...

    def content(self, text: str) -> Item_co: ...

    def reasoning(self, text: str) -> Item_co: ...

    def call_header(self, index: int, call_id: str, name: str) -> Item_co: ...

    def call_arguments(self, index: int, fragment: str) -> Item_co: ...

    def finish(self, reason: str) -> Item_co: ...

    def usage(self, usage: dict[str, int]) -> Item_co: ...


@dataclass(slots=True)
class _OpenCall:
    client_index: int
    sent: str = ""  # argument text already streamed (stream_arguments)


class ResponseBuilder(Generic[Item]):
    """Turns parser events of one answer (over all its attempts) into a front end's items."""

    def __init__(
        self,
        renderer: Renderer[Item],
        *,
        wants_call: bool = False,
        calls_withdrawn: bool = False,
        stream_arguments: bool = False,
        text_before_call: TextBeforeCall = "content",
        call_ids: Callable[[], str] = new_call_id,
        buffered: bool = False,
        instructions: Instructions | None = None,
        tools: Sequence[ToolSpec] = (),
        answered: frozenset[str] = frozenset(),
        results: Sequence[str] = (),
        example: WorkedExample | None = None,
        wrapper_tags: Sequence[str] = (),
        grounds: Grounds | None = None,
        unasked: frozenset[str] = frozenset(),
        unasked_beside_only: bool = False,
        folded: bool = False,
    ) -> None:
        self.renderer = renderer
        self.wants_call = wants_call  # tool_choice required / named: hold text until a call arrives
        # text that precedes a call: content, reasoning or drop (the last two hold text until it is known)
        self.text_before_call = text_before_call
        self.calls_withdrawn = False  # tool_choice none: calls written anyway are dropped (withdraw_calls)
        self.stream_arguments = stream_arguments
        # the client reads the whole answer at the end: a re-asked attempt's text can be taken back
        self.buffered = buffered
        self._call_ids = call_ids
        self.calls_sent = 0
        self.usage: dict[str, int] = {}
        self.tally = Tally()
        self.produced_output = False  # the client has seen content, reasoning or a call
        self._open: dict[int, _OpenCall] = {}
        self._held_text: list[str] = []
        self._sent_text: list[str] = []  # content the client has received, over all attempts
        self._echo: Repetition | None = None  # a re-ask's repetition of that content, being skipped
        # the model's repetition of toolshim's own instructions never reaches the client
        # a paraphrase of the instructions needs its whole sentence: judged where nothing streams
        self._filter = EchoFilter(instructions, MAX_MISSES if buffered else 0) if instructions is not None else None
        self._tags = WrapperTags(wrapper_tags) if wrapper_tags else None  # a repeated result's wrapper goes
        self._tools = tools  # the request's tools: a call written as plain lines names one of them
        self._plain_calls: PlainCalls | None = None  # such calls dropped, once calls are withdrawn
        self._results = tuple(results)  # the latest tool results' texts: the answer when the model gives none
        self.gate = CallGate(  # judges each call read whole; holds the instructions' worked example
            {tool.name: tool for tool in reversed(tools)},
            answered=answered,
            example=example,
            grounds=grounds,
            unasked=unasked,
            unasked_beside_only=unasked_beside_only,
        )
        self._echoes_before = 0  # the echo filter's drops before this attempt
        self._attempt_text: list[str] = []  # this attempt's text after the filters (held or sent)
        self._fallback = ""  # the latest earlier attempt's text: an answer is never left empty
        self._unused_call = False  # a call was written that became none (malformed, withheld, repeated)
        self._text_after_call = False  # text written after a call was dropped (``_after_call``)
        # a stream's answer to folded results is held to the end of its first sentence, all of it while that
        # sentence talks about a tool ("The next tool you need is `get_flight_status`."): it may be asked again
        self._watch_talk = folded and bool(tools)
        self._first_sentence = self._watch_talk
        self._lead_in_open = not buffered and example is not None  # see _holds_lead_in
        self._talking = False
        # what the question also asks about that no result covers, while the model can be asked for its call: a
        # streamed first sentence that names none of it is held with the rest of the attempt (``forgets_the_rest``)
        self.uncovered = NOTHING_UNCOVERED
        if calls_withdrawn:
            self.withdraw_calls()
        elif folded and tools:
            # the history shows results as ``- name(args) returned: ...`` lines: a model that copies them (and
            # makes up more of them) writes toolshim's rendering, not an answer: such lines are dropped
            self._plain_calls = PlainCalls(tools)

    def withdraw_calls(self) -> None:
        """No call may be made from now on (tool_choice "none", a policy, a forced answer): calls the
        model writes are withheld, also those written as plain lines, and repeats need no answering."""
        self.calls_withdrawn = True
        self._talking = False  # no call can be asked for: only a quoted result's line holds the answer back
        self._lead_in_open = False  # nor can a copied example be dropped
        self.gate.answered = frozenset()
        if self._plain_calls is None and self._tools:
            self._plain_calls = PlainCalls(self._tools)

    def allow_calls(self) -> None:
        """Calls may be returned again after ``withdraw_calls`` (a plain answer was asked for and the model
        wrote only the call again: that call is the answer); plain-line calls stay dropped."""
        self.calls_withdrawn = False

    def start(self) -> list[Item]:
        return [self.renderer.role()]

    def reasoning(self, text: str) -> list[Item]:
        """Thinking the upstream sent in its own field (not parsed from the text)."""
        if not text:
            return []
        self.produced_output = True
        return [self.renderer.reasoning(text)]

    def add_usage(self, usage: Mapping[str, int] | None) -> None:
        """Usage adds up over the attempts of one answer (re-asks are paid for too)."""
        for key, value in (usage or {}).items():
            self.usage[key] = self.usage.get(key, 0) + value

    def begin_reask(self, corrective: str = "") -> None:
        """Another attempt follows. Not buffered: text it repeats of what the client already has is
        not sent again. Buffered: the attempt's held text is taken back (only the final attempt's
        text is the answer); it stays the fallback should the next attempts bring nothing.
        ``corrective``: the re-ask's message, which the model must not echo either."""
        self._flush_filters()  # the open segment of a retried attempt is dropped with it
        if corrective and self._filter is not None:
            self._filter.add_instructions(corrective)
        self._echoes_before = self._filter.dropped if self._filter is not None else 0
        self._keep_fallback()
        if self.buffered:
            self._held_text.clear()
        self._first_sentence, self._talking = self._watch_talk, False
        self._lead_in_open = not self.buffered and self.gate.example is not None and not self.calls_withdrawn
        sent = "".join(self._sent_text)
        self._echo = Repetition(sent) if sent.strip() and not self.buffered else None

    def feed(self, events: list[Event], attempt: Attempt) -> list[Item]:
        out: list[Item] = []
        for event in events:
            if attempt.cut:
                break
            if isinstance(event, Text):
                self._text(event.text, out)
            elif isinstance(event, Reasoning):
                out.extend(self.reasoning(event.text))
            elif isinstance(event, ToolCallStart):
                self._start(event, out)
            elif isinstance(event, ToolCallArgs):
                self._args(event, out)
            elif isinstance(event, ToolCallEnd):
                self._end(event, attempt, out)
            elif isinstance(event, Malformed):
                self._malformed(event, attempt)
            elif isinstance(event, SecondToolStarted):
                attempt.cut = True
                self.tally.cuts += 1
        return out

    def end_attempt(self) -> list[Item]:
        """The attempt's output ended: the text the filters held is judged (an echo dropped, the model's
        own text held or sent as any other), so ``has_answer`` knows what the attempt gave."""
        out: list[Item] = []
        self._filtered_text(self._flush_filters(), out)
        return out

    def has_answer(self, earlier: bool = True) -> bool:
        """A call, or visible text (sent, held, or, with ``earlier``, kept from an earlier attempt as the answer
        of last resort): the answer is not empty."""
        if self.calls_sent:
            return True
        texts = (*self._sent_text, *self._held_text, *self._attempt_text, self._fallback if earlier else "")
        return any(text.strip() for text in texts)

    def retractable_text(self) -> str:
        """This attempt's text while the client has seen none of the answer (buffered, or held before a
        call): a re-ask can still replace it. Empty once any of it was sent."""
        if self.calls_sent or any(text.strip() for text in self._sent_text):
            return ""
        return "".join(self._attempt_text)

    def drop_held_text(self) -> None:
        """A required call is asked for again: the text of the attempt without it is not an answer
        (it stays the fallback should the next attempts bring nothing)."""
        self._keep_fallback()
        self._held_text.clear()

    def _keep_fallback(self) -> None:
        text = "".join(self._attempt_text)
        self._attempt_text.clear()
        if text.strip():
            self._fallback = text

    def finish(self, attempt: Attempt, include_usage: bool) -> list[Item]:
        """Held text, the finish item, and the usage item (only numbers the upstream reported)."""
        out: list[Item] = []
        self._release_held(out)
        if not self.calls_sent and not "".join(self._sent_text).strip():
            self._send_fallback(out)
        if self.calls_sent:
            reason = "tool_calls"
        else:
            reason = "length" if attempt.finish == "length" else "stop"
        out.append(self.renderer.finish(reason))
        if include_usage and self.usage:
            usage = dict(self.usage)
            usage.setdefault("total_tokens", usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0))
            out.append(self.renderer.usage(usage))
        return out

    def _send_fallback(self, out: list[Item]) -> None:
        """No call and no text: the model's own text from an earlier attempt, else the latest tool results
        as the client sent them, else a note that there is no answer (also when the length limit cut the
        answer: the finish then says ``length``). Never toolshim's instructions, never a call's words (a
        client keeps the answer in its history, and the model copies what it finds there)."""
        text = "".join(self._attempt_text) or self._fallback
        if not text.strip():  # the results pass the echo filter too: a shortened result's cut marker is toolshim's
            told = self._results_told()
            results = self._filter.feed(told) + self._filter.flush() if self._filter else told
            text = results if results.strip() else NO_ANSWER_CALL if self._unused_call else NO_ANSWER
        self._send_text(text, out)

    def _results_told(self) -> str:
        """The latest results as the answer of last resort: what went wrong when every one failed (``ValueError: no
        restaurant '1234567890'``, not the error object it came in), else the results as the client sent them."""
        failures = [tool_failure(result) for result in self._results]
        if not any(result.strip() for result in self._results) or any(failure is None for failure in failures):
            return "\n\n".join(self._results)
        return "\n".join(failure for failure in failures if failure)

    def deadline_finish(self) -> Item:
        """The request ran out of time after items were sent: end as cut by length."""
        return self.renderer.finish("length")

    # ---- events ---------------------------------------------------------------------------

    def _text(self, text: str, out: list[Item]) -> None:
        if self.calls_sent:
            self._after_call(text)
            return
        if self._filter is not None:
            text = self._filter.feed(text)
        if self._tags is not None:
            text = self._tags.feed(text)
        if self._plain_calls is not None:
            text = self._plain_calls.feed(text)
        self._filtered_text(text, out)

    def _after_call(self, text: str) -> None:
        """Text after a call is written without the call's result: a result made up ("The battery level is 0%."),
        or a promise; never the answer. A format's closing tag stops the model after a call block (its stop
        sequence); after a bare call object nothing does. Dropped (counted once)."""
        if text.strip() and not self._text_after_call:
            self._text_after_call = True
            self.tally.sanitized += 1
            log.debug("text after a call dropped")

    def _flush_filters(self) -> str:
        """The text the filters still hold: a call, a re-ask or the end closes the open segment and line."""
        text = self._filter.flush() if self._filter is not None else ""
        if self._tags is not None:
            text = self._tags.feed(text) + self._tags.flush()
        if self._plain_calls is not None:
            text = self._plain_calls.feed(text) + self._plain_calls.flush()
        return text

    def _filtered_text(self, text: str, out: list[Item]) -> None:
        if text:
            self._attempt_text.append(text)
        if self._echo is not None:
            text = self._echo.skip(text)
            if self._echo.done:
                self._echo = None
        if not text:
            return
        if self.buffered or (self.calls_sent == 0 and (self.wants_call or self.text_before_call != "content")):
            self._held_text.append(text)
            return
        if self._talking:  # held for the re-ask (Emulator._tool_talk), or sent at the end
            self._held_text.append(text)
            return
        if self._first_sentence:
            self._held_text.append(text)
            if not self._first_sentence_read() or self._talking:  # read first: it decides _talking
                return
            text = "".join(self._held_text)  # a first sentence about no tool: it and what follows stream
            self._held_text.clear()
        if self._lead_in_open and self._holds_lead_in(text):
            self._held_text.append(text)
            return
        if self._held_text:  # the opening of the example's leading lines, and the text did not go on as they do
            text = "".join(self._held_text) + text
            self._held_text.clear()
        self._send_text(text, out)

    def _holds_lead_in(self, text: str) -> bool:
        """Streamed, the attempt's opening text that may be the instructions' lines leading to their example ("For
        example:") waits for what follows: the example copied drops it (``_drop_lead_in``); anything else sends it
        on, and the rest of the attempt is not looked at."""
        pending = ("".join(self._held_text) + text).strip()
        if not pending:
            return bool(self._held_text)
        self._lead_in_open = self.gate.example is not None and self.gate.example.may_lead_in(pending)
        return self._lead_in_open

    def _first_sentence_read(self) -> bool:
        """Whether the held first sentence of a streamed answer has ended (or grown past the cap); when it
        talks about a tool, the rest of the attempt is held too (``_talking``)."""
        held = "".join(self._held_text)
        ended = ends_outside_brackets(held) if self.calls_withdrawn else SEGMENT_END.search(held) is not None
        if not self.calls_sent and not ended and len(held) < FIRST_SENTENCE_CAP:
            return False
        self._first_sentence = False
        if self.calls_withdrawn:  # a plain answer asked for: held only when it quotes a result's folded line
            self._talking = self.quotes_results(held)
            return True
        # a call: nothing to ask
        self._talking = not self.calls_sent and (
            bool(tools_talked_about(held, self._tools)) or self._leaves_out_the_rest(held)
        )
        return True

    def quotes_results(self, text: str) -> bool:
        """Whether ``text`` quotes a result as folded history tells it (``renew_loan({...}) returned: ...``) for one
        of the request's tools, or holds one of the latest JSON results whole: the rendering or the tool's output
        handed on, never an answer."""
        return quotes_folded_results(text, self._tools) or quotes_result_whole(text, self._results)

    def _leaves_out_the_rest(self, text: str) -> bool:
        """Whether ``text`` leaves out what the question also asks about (``uncovered``, when set)."""
        return self.uncovered.left_out_by(text)

    def _send_text(self, text: str, out: list[Item]) -> None:
        if self._watch_talk and ") " in text:  # a result quoted as folded history renders it: the rendering goes
            text = without_quoted_tool_results(text, self._tools)
        self.produced_output = True
        self._sent_text.append(text)
        out.append(self.renderer.content(text))

    def _release_held(self, out: list[Item], before_call: bool = False) -> None:
        """Send the held text: at the end as content; before a call as ``text_before_call`` says."""
        self._filtered_text(self._flush_filters(), out)  # a call or the end closes the open segment
        self._echo = None  # a call or the end: nothing more is a repetition
        if not self._held_text:
            return
        text = "".join(self._held_text)
        self._held_text.clear()
        if not before_call or self.text_before_call == "content" or (self.buffered and self.calls_sent):
            self._send_text(text, out)
        elif self.text_before_call == "reasoning":
            out.extend(self.reasoning(text))

    def _start(self, event: ToolCallStart, out: list[Item]) -> None:
        if not self.stream_arguments or self.calls_withdrawn:
            return
        self._release_held(out, before_call=True)
        state = _OpenCall(self.calls_sent + len(self._open))
        self._open[event.index] = state
        self.produced_output = True
        out.append(self.renderer.call_header(state.client_index, self._call_ids(), event.name))

    def _args(self, event: ToolCallArgs, out: list[Item]) -> None:
        state = self._open.get(event.index)
        if state is not None and event.fragment:
            state.sent += event.fragment
            out.append(self.renderer.call_arguments(state.client_index, event.fragment))

    def _end(self, event: ToolCallEnd, attempt: Attempt, out: list[Item]) -> None:
        if self.calls_withdrawn:  # tool_choice "none": a call written anyway is kept out of the content
            self.tally.sanitized += 1
            attempt.withheld += 1
            self._unused_call = True
            return
        state = self._open.pop(event.index, None)
        if state is None:
            event = self.gate.respelled(event)
        repeated = self._repeats(event, attempt)  # a streamed call too: the turn is cut after it
        if state is None and (repeated or self._kept_back(event, attempt, out)):  # read whole: the gate may keep it
            return
        self._release_held(out, before_call=True)
        if state is None:
            index = self.calls_sent
            self.produced_output = True
            out.append(self.renderer.call_header(index, self._call_ids(), event.name))
            out.append(self.renderer.call_arguments(index, event.arguments))
        elif not _same_json(state.sent, event.arguments):
            if event.arguments.startswith(state.sent):
                out.append(self.renderer.call_arguments(state.client_index, event.arguments[len(state.sent) :]))
            else:
                log.warning("streamed arguments of call %d differ from the repaired ones", state.client_index)
        self.calls_sent += 1
        attempt.calls += 1
        self.tally.calls += 1
        self.tally.parse_outcomes.append("repaired" if event.repairs else "clean")
        self.tally.repairs.extend(event.repairs)

    def echoed(self) -> bool:
        """Whether the echo filter dropped text of this attempt (toolshim's instructions or notes, repeated)."""
        return self._filter is not None and self._filter.dropped > self._echoes_before

    def _drop_lead_in(self, out: list[Item]) -> None:
        """The held text without the instructions' lines that lead to the example it ends with ("For example:"):
        they came with the copied example, toolshim's text (nor are they the answer of last resort)."""
        lead_in = self.gate.example.lead_in() if self.gate.example is not None else ""
        self._filtered_text(self._flush_filters(), out)  # the call closes the filters' open segment
        for texts in (self._held_text, self._attempt_text):
            text = "".join(texts)
            kept = text[: opening_at_end(text, lead_in)]
            texts[:] = [kept] if kept.strip() else []

    def _kept_back(self, event: ToolCallEnd, attempt: Attempt, out: list[Item]) -> bool:
        """Whether the gate keeps the whole call back (``gate.Verdict``); what that means for the client and the
        counts."""
        verdict = self.gate.judge(event, attempt, self.calls_sent, self.echoed())
        if verdict is None:
            return False
        if verdict in (Verdict.COPIED_EXAMPLE, Verdict.UNASKED_BESIDE):
            self.tally.sanitized += 1  # no call: the prompt's example copied, or a call beside the turn's dropped
        if verdict is Verdict.COPIED_EXAMPLE:
            self._drop_lead_in(out)
        elif verdict is not Verdict.UNASKED_BESIDE:
            self._unused_call = True  # a call was written that became none
        return True

    def _repeats(self, event: ToolCallEnd, attempt: Attempt) -> bool:
        """Is this call a repeat of one made earlier in the attempt? Then the turn is cut after it.

        With several calls allowed the stop after a call block is dropped, and a small model that
        has made its call(s) often writes the same call again and again until the token limit."""
        key = call_key(event.name, event.arguments)
        if key not in attempt.call_keys:
            attempt.call_keys.add(key)
            return False
        attempt.cut = True
        self.tally.cuts += 1
        return True

    def _malformed(self, event: Malformed, attempt: Attempt) -> None:
        attempt.malformed.append(event)
        self._unused_call = True
        self.tally.parse_outcomes.append("malformed")
        self.tally.sanitized += 1
        if event.index is not None and self._open.pop(event.index, None) is not None:
            attempt.abandoned_call = True  # part of this call already reached the client
        log.info("malformed tool block: %s", event.reason)


def close_reason(finish: str | None) -> FinishReason:
    """The upstream's finish reason as a parser's ``close`` takes it (unknown ones end like a stop)."""
    if finish in ("length", "content_filter", "tool_calls"):
        return cast(FinishReason, finish)
    return "stop"


def _same_json(a: str, b: str) -> bool:
    try:
        return bool(json.loads(a) == json.loads(b))
    except ValueError:
        return False
