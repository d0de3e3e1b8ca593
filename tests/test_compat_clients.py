"""Client compatibility (issue 17): a real tool loop through toolshim with each client people use.

The upstream is scripted: the first model turn writes a hermes call to ``get_weather``, the second
(after the tool result) answers in text. Each client must get a structured call, run the tool, send
the result back in its own way and end with the answer. The README's "Clients" snippets are these.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from tests.fakes import Reply, text_stream
from tests.test_emulation import WEATHER, call_text, emulated, pieces

ANSWER = "It is 21 C and sunny in Paris."
QUESTION = "What is the weather in Paris?"


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return json.dumps({"city": city, "temperature_c": 21, "conditions": "sunny"})


@pytest.fixture
async def proxy(start_proxy: Any, fake_upstream: Any) -> Any:
    running = await start_proxy(models=emulated("hermes"))
    fake_upstream.script(
        Reply(pieces=text_stream(pieces(call_text("hermes"), 5))), Reply(pieces=text_stream(pieces(ANSWER, 6)))
    )
    running.fake = fake_upstream
    return running


def assert_loop_went_through(fake: Any) -> None:
    """Two model turns; the second saw the tool result, rendered for the model (no ``tool`` role)."""
    assert len(fake.requests) == 2
    second = json.dumps(fake.requests[1]["messages"])
    assert "temperature_c" in second and '"role": "tool"' not in second


def openai_sync_loop(base_url: str, stream: bool) -> str:
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    while True:
        if stream:
            with client.chat.completions.stream(model="qwen", messages=messages, tools=WEATHER) as events:
                for _ in events:
                    pass
                reply = events.get_final_completion().choices[0].message
        else:
            reply = client.chat.completions.create(model="qwen", messages=messages, tools=WEATHER).choices[0].message
        if not reply.tool_calls:
            client.close()
            return reply.content or ""
        messages.append(reply.model_dump(exclude_none=True))
        for call in reply.tool_calls:
            result = get_weather(**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream-helper"])
async def test_openai_python_sync(proxy: Any, stream: bool) -> None:
    assert await asyncio.to_thread(openai_sync_loop, proxy.base_url, stream) == ANSWER
    assert_loop_went_through(proxy.fake)


async def test_openai_python_async(proxy: Any) -> None:
    from openai import AsyncOpenAI

    async with AsyncOpenAI(base_url=proxy.base_url, api_key="unused", max_retries=0) as client:
        messages: list[Any] = [{"role": "user", "content": QUESTION}]
        while True:
            reply = (
                (await client.chat.completions.create(model="qwen", messages=messages, tools=WEATHER, stream=False))
                .choices[0]
                .message
            )
            if not reply.tool_calls:
                break
            messages.append(reply.model_dump(exclude_none=True))
            for call in reply.tool_calls:
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call.id,
                        "content": get_weather(**json.loads(call.function.arguments)),
                    }
                )
    assert reply.content == ANSWER
    assert_loop_went_through(proxy.fake)


async def test_langchain_bind_tools(proxy: Any) -> None:
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    weather = tool(get_weather)
    async with httpx.AsyncClient() as http:  # closed at the end (ChatOpenAI's default client never is)
        llm = ChatOpenAI(
            model="qwen", base_url=proxy.base_url, api_key="unused", max_retries=0, http_async_client=http
        ).bind_tools([weather])
        messages: list[Any] = [HumanMessage(QUESTION)]
        reply = await llm.ainvoke(messages)
        assert reply.tool_calls[0]["name"] == "get_weather" and reply.tool_calls[0]["args"] == {"city": "Paris"}
        call = reply.tool_calls[0]
        messages += [reply, ToolMessage(weather.invoke(call["args"]), tool_call_id=call["id"])]
        final = await llm.ainvoke(messages)
    assert final.content == ANSWER
    assert_loop_went_through(proxy.fake)


async def test_langgraph_agent(proxy: Any) -> None:
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    tools = [tool(get_weather)]
    http = httpx.AsyncClient()
    llm = ChatOpenAI(
        model="qwen", base_url=proxy.base_url, api_key="unused", max_retries=0, http_async_client=http
    ).bind_tools(tools)

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await llm.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    async with http:
        result = await graph.compile().ainvoke({"messages": [HumanMessage(QUESTION)]})
    last = result["messages"][-1]
    assert isinstance(last, AIMessage) and last.content == ANSWER
    assert any(getattr(m, "tool_calls", None) for m in result["messages"])
    assert END  # the graph ends by tools_condition once the model answers
    assert_loop_went_through(proxy.fake)


@pytest.mark.parametrize("stream", [False, True])
async def test_litellm_as_client(proxy: Any, stream: bool) -> None:
    from toolshim.upstream.litellm import _import_litellm

    litellm = _import_litellm()  # the same quiet set-up the proxy uses (no price-list download)
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    kwargs: dict[str, Any] = {"model": "openai/qwen", "api_base": proxy.base_url, "api_key": "unused", "tools": WEATHER}
    while True:
        if stream:
            chunks = [c async for c in await litellm.acompletion(messages=messages, stream=True, **kwargs)]
            message = litellm.stream_chunk_builder(chunks, messages=messages).choices[0].message
        else:
            message = (await litellm.acompletion(messages=messages, **kwargs)).choices[0].message
        if not message.tool_calls:
            break
        messages.append(
            {
                "role": "assistant",
                "content": message.content,
                "tool_calls": [c.model_dump() for c in message.tool_calls],
            }
        )
        for call in message.tool_calls:
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": get_weather(**json.loads(call.function.arguments))}
            )
    assert message.content == ANSWER
    assert_loop_went_through(proxy.fake)


@pytest.mark.parametrize("stream", [False, True], ids=["run", "run_stream"])
async def test_pydantic_ai(start_proxy: Any, fake_upstream: Any, stream: bool) -> None:
    from openai import AsyncOpenAI
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    # run_stream ends at the first text of a turn: a preamble before the call would end the run there
    proxy = await start_proxy(models=emulated("hermes", text_before_call="reasoning"))
    fake_upstream.script(
        Reply(pieces=text_stream(pieces("Let me look that up.\n" + call_text("hermes"), 5))),
        Reply(pieces=text_stream(pieces(ANSWER, 6))),
    )
    async with AsyncOpenAI(base_url=proxy.base_url, api_key="unused", max_retries=0) as client:
        model = OpenAIChatModel("qwen", provider=OpenAIProvider(openai_client=client))
        agent = Agent(model, tools=[get_weather])
        if stream:
            async with agent.run_stream(QUESTION) as run:
                answer = await run.get_output()
        else:
            answer = (await agent.run(QUESTION)).output
    assert answer == ANSWER
    assert_loop_went_through(fake_upstream)


async def test_openai_agents_sdk(proxy: Any) -> None:
    from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool
    from openai import AsyncOpenAI

    async with AsyncOpenAI(base_url=proxy.base_url, api_key="unused", max_retries=0) as client:
        agent = Agent(
            name="weather",
            instructions="Answer with the weather tool.",
            tools=[function_tool(get_weather)],
            model=OpenAIChatCompletionsModel(model="qwen", openai_client=client),
        )
        result = await Runner.run(agent, QUESTION, run_config=RunConfig(tracing_disabled=True))
    assert result.final_output == ANSWER
    assert_loop_went_through(proxy.fake)


@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning")  # inside llama-index
async def test_llamaindex_openai_like(proxy: Any) -> None:
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.llms.openai_like import OpenAILike

    llm = OpenAILike(
        model="qwen",
        api_base=proxy.base_url,
        api_key="unused",
        is_chat_model=True,
        is_function_calling_model=True,
        max_retries=0,
    )
    agent = FunctionAgent(tools=[get_weather], llm=llm)
    answer = await agent.run(QUESTION)
    assert str(answer).strip() == ANSWER
    assert_loop_went_through(proxy.fake)
