"""The real agent loops ``bench/agent_loops.py`` runs: each framework's own loop, nothing of ours around it.

One async function per loop, all with the same signature: given a :class:`LoopContext` (where toolshim
listens, the exposed model name, the task, its toolbox, the round cap) it runs the task's question
through that framework's loop with the task's tools and returns a :class:`LoopEnd` (the final answer
text, or that the framework stopped at its round cap). No repeat guard, no ``tool_choice`` trick, no
retry of ours: what the framework does with what toolshim answers is what is measured.

* ``openai``: the OpenAI Python SDK, a plain while-loop over ``chat.completions.create``;
* ``openai-stream``: the same loop with ``stream=True`` (deltas merged as a client does);
* ``langgraph``: LangGraph's prebuilt ``create_react_agent`` with LangChain's ``ChatOpenAI``;
* ``agents-chat``: the OpenAI Agents SDK's ``Runner`` with ``OpenAIChatCompletionsModel``;
* ``agents-responses``: the same with its default ``OpenAIResponsesModel`` (toolshim's ``/v1/responses``);
* ``pydantic-ai``: pydantic-ai's ``Agent`` with ``OpenAIChatModel``;
* ``llamaindex``: LlamaIndex's ``FunctionAgent`` with ``OpenAILike`` (it streams by default).

Every loop gets the same system prompt (``loop_tasks.SYSTEM``), temperature 0 and a token cap per
model turn; its round cap is the framework's own setting (``max_turns``, ``recursion_limit``,
``request_limit``, ``max_iterations``).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from bench.loop_tasks import SYSTEM, Call, Task, Tool, Toolbox


@dataclass(slots=True)
class LoopContext:
    """What one loop needs: where to send it, the task, where its tools record calls, its bounds."""

    base_url: str
    model: str
    task: Task
    box: Toolbox
    max_rounds: int = 8
    max_tokens: int | None = 256  # None: no limit sent (what the frameworks send unless told)
    request_timeout: float = 120.0


@dataclass(slots=True)
class LoopEnd:
    """How a loop ended: its final answer, or ``capped`` (the framework's round cap came first)."""

    answer: str = ""
    capped: bool = False


def execute(tool: Tool | None, name: str, arguments: str, box: Toolbox) -> str:
    """Run one call from its JSON arguments text (what the plain SDK loops get)."""
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        box.calls.append(Call(name, {"_raw": arguments}))
        return json.dumps({"error": "the arguments are not valid JSON"})
    if tool is None:
        box.calls.append(Call(name, args if isinstance(args, dict) else {"_raw": args}))
        return json.dumps({"error": f"no tool named {name!r}"})
    return tool.run(box, args)


# ---- the OpenAI SDK ----------------------------------------------------------------------------


async def openai_loop(ctx: LoopContext, stream: bool = False) -> LoopEnd:
    """A plain agent loop: ask, run every call, send the results back, until an answer without calls."""
    from openai import AsyncOpenAI

    tools = {tool.name: tool for tool in ctx.task.offered()}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": ctx.task.question},
    ]
    params: dict[str, Any] = {
        "model": ctx.model,
        "tools": [tool.openai() for tool in tools.values()],
        "temperature": 0,
        "max_tokens": ctx.max_tokens,
    }
    async with AsyncOpenAI(
        base_url=ctx.base_url, api_key="unused", timeout=ctx.request_timeout, max_retries=0
    ) as client:
        for _ in range(ctx.max_rounds):
            if stream:
                content, calls = await _streamed_turn(client, messages, params)
            else:
                response = await client.chat.completions.create(messages=messages, **params)  # type: ignore[call-overload]
                message = response.choices[0].message
                content = message.content or ""
                calls = [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []]
            if not calls:
                return LoopEnd(answer=content)
            messages.append(
                {
                    "role": "assistant",
                    "content": content or None,
                    "tool_calls": [
                        {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}
                        for cid, name, arguments in calls
                    ],
                }
            )
            for cid, name, arguments in calls:
                result = execute(tools.get(name), name, arguments, ctx.box)
                messages.append({"role": "tool", "tool_call_id": cid, "content": result})
    return LoopEnd(capped=True)


async def _streamed_turn(
    client: Any, messages: list[dict[str, Any]], params: dict[str, Any]
) -> tuple[str, list[tuple[str, str, str]]]:
    """One streamed turn merged from its deltas: the text and the calls ``(id, name, arguments)``."""
    stream = await client.chat.completions.create(
        messages=messages, stream=True, stream_options={"include_usage": True}, **params
    )
    content: list[str] = []
    calls: dict[int, list[str]] = {}
    async for chunk in stream:
        for choice in chunk.choices:
            delta = choice.delta
            content.append(delta.content or "")
            for part in delta.tool_calls or []:
                entry = calls.setdefault(part.index, ["", "", ""])
                entry[0] = part.id or entry[0]
                if part.function is not None:
                    entry[1] += part.function.name or ""
                    entry[2] += part.function.arguments or ""
    return "".join(content), [(cid, name, args) for cid, name, args in (calls[i] for i in sorted(calls))]


async def openai_stream_loop(ctx: LoopContext) -> LoopEnd:
    return await openai_loop(ctx, stream=True)


# ---- LangGraph ---------------------------------------------------------------------------------


async def langgraph_loop(ctx: LoopContext) -> LoopEnd:
    """``create_react_agent``: a model node and a ToolNode, until the model answers without calls."""
    from langchain_core.tools import StructuredTool
    from langchain_openai import ChatOpenAI
    from langgraph.errors import GraphRecursionError
    from langgraph.prebuilt import create_react_agent

    # LangChain caches one default httpx client per base URL for the whole process; its pooled
    # connections belong to the event loop that opened them, so a later loop on another event loop (each
    # test has its own) fails with "Connection error". Each loop brings its own client.
    http_client = httpx.AsyncClient(timeout=ctx.request_timeout)
    llm = ChatOpenAI(
        model=ctx.model,
        base_url=ctx.base_url,
        api_key="unused",  # type: ignore[arg-type]
        temperature=0,
        max_tokens=ctx.max_tokens,  # type: ignore[call-arg]
        max_retries=0,
        timeout=ctx.request_timeout,
        http_async_client=http_client,
    )
    tools = [
        StructuredTool.from_function(
            func=_kwargs_runner(tool, ctx.box),
            name=tool.name,
            description=tool.description,
            args_schema=tool.parameters,
        )
        for tool in ctx.task.offered()
    ]
    with warnings.catch_warnings():  # moved to `langchain.agents` (not installed here), still LangGraph's own
        warnings.simplefilter("ignore")
        agent = create_react_agent(llm, tools, prompt=SYSTEM)
    try:
        # one step per model turn and one per tool turn: max_rounds model turns fit, one more does not
        state = await agent.ainvoke(
            {"messages": [("user", ctx.task.question)]}, config={"recursion_limit": 2 * ctx.max_rounds}
        )
    except GraphRecursionError:
        return LoopEnd(capped=True)
    finally:
        await http_client.aclose()
    answer = _text_of(state["messages"][-1].content)
    return LoopEnd(capped=True) if answer == LANGGRAPH_OUT_OF_STEPS else LoopEnd(answer=answer)


# What create_react_agent answers itself when the model still calls tools at its last step.
LANGGRAPH_OUT_OF_STEPS = "Sorry, need more steps to process this request."


def _kwargs_runner(tool: Tool, box: Toolbox) -> Callable[..., str]:
    def run(**kwargs: Any) -> str:
        return tool.run(box, kwargs)

    return run


def _text_of(content: Any) -> str:
    """A message's content as text (a string, or a list of parts with ``text``)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, Mapping) else str(p) for p in content)
    return str(content or "")


# ---- the OpenAI Agents SDK ---------------------------------------------------------------------


async def agents_loop(ctx: LoopContext, api: Literal["chat", "responses"]) -> LoopEnd:
    """``Runner.run`` with ``max_turns``: Chat Completions or the SDK's default, the Responses API."""
    from agents import (
        Agent,
        FunctionTool,
        ModelSettings,
        OpenAIChatCompletionsModel,
        OpenAIResponsesModel,
        RunConfig,
        Runner,
    )
    from agents.exceptions import MaxTurnsExceeded
    from openai import AsyncOpenAI

    def invoker(tool: Tool) -> Callable[[Any, str], Awaitable[str]]:
        async def invoke(tool_context: Any, arguments: str) -> str:
            return execute(tool, tool.name, arguments, ctx.box)

        return invoke

    tools = [
        FunctionTool(
            name=tool.name,
            description=tool.description,
            params_json_schema=tool.parameters,
            on_invoke_tool=invoker(tool),
            strict_json_schema=False,
        )
        for tool in ctx.task.offered()
    ]
    async with AsyncOpenAI(
        base_url=ctx.base_url, api_key="unused", timeout=ctx.request_timeout, max_retries=0
    ) as client:
        model: Any = (
            OpenAIChatCompletionsModel(model=ctx.model, openai_client=client)
            if api == "chat"
            else OpenAIResponsesModel(model=ctx.model, openai_client=client)
        )
        agent = Agent(
            name="assistant",
            instructions=SYSTEM,
            tools=list(tools),
            model=model,
            model_settings=ModelSettings(temperature=0, max_tokens=ctx.max_tokens),
        )
        try:
            result = await Runner.run(
                agent, ctx.task.question, max_turns=ctx.max_rounds, run_config=RunConfig(tracing_disabled=True)
            )
        except MaxTurnsExceeded:
            return LoopEnd(capped=True)
    return LoopEnd(answer=str(result.final_output or ""))


async def agents_chat_loop(ctx: LoopContext) -> LoopEnd:
    return await agents_loop(ctx, "chat")


async def agents_responses_loop(ctx: LoopContext) -> LoopEnd:
    return await agents_loop(ctx, "responses")


# ---- pydantic-ai -------------------------------------------------------------------------------


async def pydantic_ai_loop(ctx: LoopContext) -> LoopEnd:
    """``Agent.run`` with ``UsageLimits(request_limit=...)``: model requests are its rounds."""
    from openai import AsyncOpenAI
    from pydantic_ai import Agent, Tool
    from pydantic_ai.exceptions import UsageLimitExceeded
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.usage import UsageLimits

    tools = [
        Tool.from_schema(
            function=_kwargs_runner(tool, ctx.box),
            name=tool.name,
            description=tool.description,
            json_schema=tool.parameters,
        )
        for tool in ctx.task.offered()
    ]
    async with AsyncOpenAI(
        base_url=ctx.base_url, api_key="unused", timeout=ctx.request_timeout, max_retries=0
    ) as client:
        model = OpenAIChatModel(ctx.model, provider=OpenAIProvider(openai_client=client))
        agent = Agent(
            model,
            instructions=SYSTEM,
            tools=tools,
            model_settings={"temperature": 0.0, "max_tokens": ctx.max_tokens},
        )
        try:
            result = await agent.run(ctx.task.question, usage_limits=UsageLimits(request_limit=ctx.max_rounds))
        except UsageLimitExceeded:
            return LoopEnd(capped=True)
    return LoopEnd(answer=str(result.output or ""))


# ---- LlamaIndex --------------------------------------------------------------------------------


async def llamaindex_loop(ctx: LoopContext) -> LoopEnd:
    """``FunctionAgent`` (streaming, its default) with ``OpenAILike``, ``max_iterations`` rounds."""
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.tools import FunctionTool
    from llama_index.llms.openai_like import OpenAILike

    tools = [
        FunctionTool.from_defaults(
            fn=_kwargs_runner(tool, ctx.box),
            name=tool.name,
            description=tool.description,
            fn_schema=_pydantic_model(tool),
        )
        for tool in ctx.task.offered()
    ]
    llm = OpenAILike(
        model=ctx.model,
        api_base=ctx.base_url,
        api_key="unused",
        is_chat_model=True,
        is_function_calling_model=True,
        temperature=0,
        max_tokens=ctx.max_tokens,
        timeout=ctx.request_timeout,
        max_retries=0,
        context_window=32768,
    )
    agent = FunctionAgent(tools=list(tools), llm=llm, system_prompt=SYSTEM)
    try:
        result = await agent.run(user_msg=ctx.task.question, max_iterations=ctx.max_rounds)
    except Exception as exc:
        if "Max iterations" in str(exc):
            return LoopEnd(capped=True)
        raise
    response = getattr(result, "response", None)
    return LoopEnd(answer=_text_of(getattr(response, "content", None) if response is not None else str(result)))


_SCALARS: dict[str, Any] = {"string": str, "number": float, "integer": int, "boolean": bool}


def _python_type(schema: dict[str, Any], name: str) -> Any:
    """The Python type of a parameter's JSON Schema (an array of strings as ``list[str]``, an object with properties
    as a model of its own: not ``str``)."""
    if "enum" in schema:
        return Literal[tuple(schema["enum"])]
    if schema.get("type") == "array":
        return list[_python_type(schema.get("items", {}), name)]  # type: ignore[misc]
    if schema.get("type") == "object" and "properties" in schema:
        return _model_of(name, schema)
    return _SCALARS.get(schema.get("type", "string"), str)


def _model_of(name: str, schema: dict[str, Any]) -> Any:
    """A pydantic model with the properties of the object ``schema``."""
    from pydantic import Field, create_model

    required = set(schema.get("required", ()))
    fields: dict[str, Any] = {}
    for key, item in schema["properties"].items():
        kind = _python_type(item, f"{name}_{key}")
        description = item.get("description")
        if key in required:
            fields[key] = (kind, Field(..., description=description))
        else:
            fields[key] = (kind | None, Field(None, description=description))
    return create_model(name, **fields)


def _pydantic_model(tool: Tool) -> Any:
    """A pydantic model with the tool's parameters (LlamaIndex describes a tool by one)."""
    return _model_of(tool.name, tool.parameters)


Runner = Callable[[LoopContext], Awaitable[LoopEnd]]
FRAMEWORKS: dict[str, Runner] = {
    "openai": openai_loop,
    "openai-stream": openai_stream_loop,
    "langgraph": langgraph_loop,
    "agents-chat": agents_chat_loop,
    "agents-responses": agents_responses_loop,
    "pydantic-ai": pydantic_ai_loop,
    "llamaindex": llamaindex_loop,
}
