"""BFCL v4 multi-turn questions through toolshim's shipped rules and through the model's own chat template.

An outside yardstick for whole loops (issue: real agent loops). ``multi_turn_base`` questions are
conversations of several user turns over executable tool environments (a file system, a ticket system, a
trading bot...); after each turn BFCL compares the environment's state and the calls' results with those
its ground truth leaves. The loop is BFCL's own ``inference_multi_turn_FC``: per user turn, ask; run
every call the answer carries in BFCL's environment; send the results back as ``tool`` messages; again,
until an answer carries no call (or 20 steps, which fails the question). Scoring is BFCL's
``multi_turn_checker``. Modes:

* ``toolshim``: the rule the demo rules ship for the local model (``demo/rules.json5``'s ``demo-model``;
  ``--set KEY=VALUE`` changes it), through a toolshim started here;
* ``template``: the fair native baseline, as ``bench/bfcl.py --modes template``: the GGUF's own chat
  template renders the tools, the conversation (calls as the template writes them, results as ``tool``
  turns), the prompt goes to the model server's raw ``/v1/completions``, and the completion is read as
  llama.cpp's Hermes parser reads it.

``python bench/bfcl_multi_turn.py --sample 10 --server http://127.0.0.1:8080/v1`` (the server needs a
context of 16k tokens: the tools of two environments are about 7k) or ``make bench-bfcl-multi-turn``.
Temperature 0, non-streaming, one request at a time.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from openai import APIError, OpenAI

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.agent_loops import load_rules  # noqa: E402
from bench.bfcl import completion_request, template_message  # noqa: E402
from bench.bfcl_score import Bfcl, Question  # noqa: E402
from bench.template_mode import ChatTemplate  # noqa: E402
from scripts import local_stack  # noqa: E402
from scripts.local_model import model_path, spec_for  # noqa: E402

CATEGORY = "multi_turn_base"
MAX_STEPS = 20  # BFCL's MAXIMUM_STEP_LIMIT: more steps in one turn fail the question
MODES = ("toolshim", "template")


@dataclass
class Run:
    """One question in one mode: the calls of every step of every turn, and BFCL's verdict."""

    mode: str
    id: str
    steps: list[list[list[str]]] = field(default_factory=list)  # per turn, per step, the calls as BFCL writes them
    said: list[list[str]] = field(default_factory=list)  # per turn, per step, the answer's text
    valid: bool = False
    error: str = ""
    requests: int = 0
    seconds: float = 0.0
    forced_quit: bool = False


class MultiTurn:
    """BFCL's multi-turn data, environments and checker (imported once ``Bfcl`` installed its stubs)."""

    def __init__(self, bfcl: Bfcl) -> None:
        from bfcl_eval import utils as bfcl_utils
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call
        from bfcl_eval.model_handler.utils import convert_to_function_call

        self.bfcl = bfcl
        self._utils = bfcl_utils
        self._checker = multi_turn_checker
        self._execute = execute_multi_turn_func_call
        self._to_calls = convert_to_function_call

    def entries(self, sample: int, seed: int) -> list[dict[str, Any]]:
        """``sample`` seeded questions (all when 0), in BFCL's order, each with its ground truth."""
        entries = self._utils.load_dataset_entry(CATEGORY)
        truth = {e["id"]: e["ground_truth"] for e in self._utils.load_ground_truth_entry(CATEGORY)}
        if 0 < sample < len(entries):
            order = list(range(len(entries)))
            random.Random(f"{seed}:{CATEGORY}").shuffle(order)
            picked = set(order[:sample])
            entries = [e for i, e in enumerate(entries) if i in picked]
        return [{**e, "ground_truth": truth[e["id"]]} for e in entries]

    def tools(self, entry: dict[str, Any]) -> list[dict[str, Any]]:
        return self.bfcl.tools(Question(CATEGORY, entry["id"], [], entry["function"], None))

    def execute(self, calls: list[str], entry: dict[str, Any], instance: str) -> list[str]:
        results, _ = self._execute(calls, entry["initial_config"], entry["involved_classes"], instance, entry["id"])
        return [str(result) for result in results]

    def calls(self, message: Any) -> list[str]:
        """The answer's calls as BFCL's FC handler decodes them (``name(a=1)``); raises when undecodable."""
        listed = [{call.function.name: call.function.arguments} for call in message.tool_calls or ()]
        return list(self._to_calls(listed)) if listed else []

    def check(self, run: Run, entry: dict[str, Any]) -> None:
        if run.forced_quit:
            run.error = f"more than {MAX_STEPS} steps in one turn"
            return
        if len(run.steps) != len(entry["ground_truth"]):
            run.error = f"{len(run.steps)} turns answered of {len(entry['ground_truth'])}"
            return
        try:
            name = f"check_{run.mode}_{uuid.uuid4().hex}"
            verdict = self._checker(run.steps, entry["ground_truth"], entry, CATEGORY, name)
        except Exception as exc:  # BFCL's checker asserts on odd states: a wrong answer, as BFCL counts it
            run.error = f"checker: {exc}"
            return
        run.valid = bool(verdict.get("valid"))
        run.error = "" if run.valid else str(verdict.get("error_type") or verdict.get("error_message") or "")


class Asker:
    """One request of a mode: the next assistant message for a conversation."""

    def __init__(self, mode: str, client: OpenAI, model: str, template: ChatTemplate | None, max_tokens: int) -> None:
        self.mode, self.client, self.model, self.template, self.max_tokens = mode, client, model, template, max_tokens

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if self.template is None:
            response = self.client.chat.completions.create(
                model=self.model, messages=messages, tools=tools, tool_choice="auto",  # type: ignore[arg-type]
                parallel_tool_calls=True, temperature=0, max_tokens=self.max_tokens,
            )  # fmt: skip
            return response.choices[0].message
        prompt = self.template.prompt_for(messages, tools, parallel=True)
        completion = self.client.completions.create(
            model=self.model, **completion_request(self.template, prompt, self.max_tokens)
        )
        return template_message(completion.choices[0].text, prompt)


def assistant_turn(message: Any, calls: list[str]) -> tuple[dict[str, Any], list[str]]:
    """The assistant message as the conversation goes on with it, and the ids of its calls."""
    ids = [f"call_{uuid.uuid4().hex[:12]}" for _ in calls]
    tool_calls = [
        {"id": call_id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
        for call_id, c in zip(ids, message.tool_calls or (), strict=False)
    ]
    turn: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
    if tool_calls:
        turn["tool_calls"] = tool_calls
    return turn, ids


def run_question(multi: MultiTurn, ask: Asker, entry: dict[str, Any]) -> Run:
    """BFCL's ``inference_multi_turn_FC`` for one question in one mode, then its checker."""
    run = Run(ask.mode, entry["id"])
    tools = multi.tools(entry)
    instance = f"{ask.mode}_{uuid.uuid4().hex}"
    multi.execute([], entry, instance)  # the environments, in their initial state
    messages: list[dict[str, Any]] = []
    began = time.monotonic()
    for turn in entry["question"]:
        messages += copy.deepcopy(turn)
        turn_steps: list[list[str]] = []
        turn_said: list[str] = []
        for _ in range(MAX_STEPS + 1):
            try:
                message = ask(messages, tools)
            except APIError as exc:
                run.error = f"request: {exc}"
                break
            run.requests += 1
            try:
                calls = multi.calls(message)
            except Exception:  # BFCL ends the turn on an undecodable answer
                calls = []
            turn_steps.append(calls)
            turn_said.append(str(message.content or ""))
            said, ids = assistant_turn(message, calls)
            messages.append(said)
            if not calls:
                break
            results = multi.execute(calls, entry, instance)
            messages += [{"role": "tool", "tool_call_id": i, "content": r} for i, r in zip(ids, results, strict=False)]
        else:
            run.forced_quit = True
        run.steps.append(turn_steps)
        run.said.append(turn_said)
        if run.forced_quit or run.error:
            break
    run.seconds = round(time.monotonic() - began, 1)
    if not run.error:
        multi.check(run, entry)
    return run


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--model", choices=("qwen", "smollm"), default="qwen")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated of %(default)s")
    parser.add_argument("--sample", type=int, default=10, help="questions (0: all 200); default 10")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ids", default="", help="comma-separated question ids instead of a sample")
    parser.add_argument("--max-tokens", type=int, default=384)
    parser.add_argument("--rules", type=Path, default=ROOT / "demo" / "rules.json5")
    parser.add_argument("--rule-model", default=None, help="the rule of --rules to use (default: its first exact one)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="change that rule")
    parser.add_argument("--server", metavar="URL", help="a running model server (16k context) instead of starting one")
    parser.add_argument("--out", type=Path, default=Path("bfcl-multi-turn.jsonl"))
    args = parser.parse_args(argv)
    args.mode_list = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not args.mode_list or any(m not in MODES for m in args.mode_list):
        parser.error(f"--modes: some of {', '.join(MODES)}")
    return args


def table(runs: Sequence[Run], heading: str) -> str:
    lines = [heading, "", "| mode | correct | forced quits | median requests | median s |", "|---|---|---|---|---|"]
    for mode in dict.fromkeys(r.mode for r in runs):
        mine = [r for r in runs if r.mode == mode]
        right = sum(r.valid for r in mine)
        requests = sorted(r.requests for r in mine)[len(mine) // 2]
        seconds = sorted(r.seconds for r in mine)[len(mine) // 2]
        lines.append(
            f"| {mode} | {right}/{len(mine)} ({100 * right / len(mine):.0f}%) | {sum(r.forced_quit for r in mine)} "
            f"| {requests} | {seconds} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    multi = MultiTurn(Bfcl())
    entries = multi.entries(0 if args.ids else args.sample, args.seed)
    if args.ids:
        wanted = args.ids.split(",")
        entries = sorted((e for e in entries if e["id"] in wanted), key=lambda e: wanted.index(e["id"]))
    runs: list[Run] = []
    with local_stack.services_stopped_on_exit() as started, args.out.open("w", encoding="utf-8") as out:
        if args.server:
            base_url, model_id = args.server.rstrip("/"), spec_for(args.model).alias
        else:
            server = local_stack.start_model_server(args.model, ctx=16384)
            started.append(server)
            base_url, model_id = server.base_url, server.model_id
        direct = OpenAI(base_url=base_url, api_key="unused", timeout=900, max_retries=0)
        askers: dict[str, Asker] = {}
        if "template" in args.mode_list:
            template = ChatTemplate.from_gguf(model_path(args.model))
            askers["template"] = Asker("template", direct, model_id, template, args.max_tokens)
        if "toolshim" in args.mode_list:
            rules, exposed, rule = load_rules(args.rules, args.rule_model, args.set, base_url, model_id)
            proxy = local_stack.start_toolshim(rules)
            started.append(proxy)
            shim = OpenAI(base_url=proxy.base_url, api_key="unused", timeout=900, max_retries=0)
            askers["toolshim"] = Asker("toolshim", shim, exposed, None, args.max_tokens)
            print(f"[setup] toolshim rule {json.dumps(rule)}", file=sys.stderr)
        for mode in args.mode_list:  # one mode at a time: the server's prompt cache serves its steps
            for number, entry in enumerate(entries, 1):
                run = run_question(multi, askers[mode], entry)
                runs.append(run)
                out.write(json.dumps(asdict(run), ensure_ascii=False) + "\n")
                out.flush()
                mark = "✓" if run.valid else "✗"
                print(f"  {mark} {mode:9} {number}/{len(entries)} {run.id:20} {run.requests:3} requests "
                      f"{run.seconds:7.1f} s  {run.error[:70]}", file=sys.stderr)  # fmt: skip
    heading = (
        f"BFCL v4 {CATEGORY}, model {spec_for(args.model).alias}, {len(entries)} questions (seed {args.seed}), "
        f"temperature 0, max_tokens {args.max_tokens}"
    )
    print(table(runs, heading))
    return 0


if __name__ == "__main__":
    sys.exit(main())
