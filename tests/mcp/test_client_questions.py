"""A component's questions to the calling client (`chitin:host/client`), driven by the official
MCP Python SDK: a 2026-07-28 client is asked through input-required results (one round or
several, the signed request state replaying earlier answers), a 2025-11-25 session by real
`elicitation/create` requests; a client without the capability a question needs gets -32021."""

import shutil
import tempfile

import httpx2
import pytest
from mcp import Client, MCPError, types
from mcp.client.streamable_http import streamable_http_client

from conftest import CONFORMANCE, HttpServer

MISSING_CLIENT_CAPABILITY = -32021
INVALID_PARAMS = -32602


@pytest.fixture(scope="module")
def http_server():
    """A server on the conformance fixture, whose input-required tools ask the client."""
    data = tempfile.mkdtemp(prefix="chitin-mcp-client-questions-")
    server = HttpServer(["--components", str(CONFORMANCE)], data)
    yield server
    server.stop()
    shutil.rmtree(data, ignore_errors=True)


def client(server, mode="auto", **kwargs) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {server.token}"}, timeout=30)
    return Client(streamable_http_client(server.url, http_client=http), mode=mode, **kwargs)


def text_of(result) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


def answering(answers, asked):
    """An elicitation callback that records each question and answers from `answers` by the
    form's one field."""

    async def answer(context, params):
        asked.append(params.message)
        (field,) = params.requested_schema["properties"]
        return types.ElicitResult(action="accept", content={field: answers[field]})

    return answer


@pytest.mark.anyio
async def test_a_component_question_is_answered_through_input_required(http_server):
    asked = []
    callback = answering({"name": "Ada"}, asked)
    async with client(http_server, elicitation_callback=callback) as c:
        result = await c.call_tool("test_input_required_result_elicitation", {})
        assert not result.is_error, text_of(result)
        assert text_of(result) == "Hello, Ada!"
    assert asked == ["What is your name?"]


@pytest.mark.anyio
async def test_a_second_round_carries_the_first_answer_in_the_state(http_server):
    asked = []
    callback = answering({"name": "Ada", "color": "green"}, asked)
    async with client(http_server, elicitation_callback=callback) as c:
        result = await c.call_tool("test_input_required_result_multi_round", {})
        assert not result.is_error, text_of(result)
        assert text_of(result) == "Ada's favorite color is green"
    # Each question is asked once: the second round replays the first answer from the state.
    assert asked == ["Step 1: What is your name?", "Step 2: What is your favorite color?"]


@pytest.mark.anyio
async def test_a_tampered_state_is_refused_and_the_genuine_one_answers_once(http_server):
    async def never(context, params):
        raise AssertionError("this test answers by hand")

    tool = "test_input_required_result_elicitation"
    answer = {"user_name": types.ElicitResult(action="accept", content={"name": "Ada"})}
    async with client(http_server, elicitation_callback=never) as c:
        first = await c.session.call_tool(tool, {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult), first
        assert set(first.input_requests) == {"user_name"}
        state = first.request_state
        tampered = state[:-2] + ("AA" if not state.endswith("AA") else "BB")
        with pytest.raises(MCPError) as refused:
            await c.session.call_tool(tool, {}, input_responses=answer, request_state=tampered)
        assert refused.value.error.code == INVALID_PARAMS
        assert "request state was refused" in refused.value.error.message

        done = await c.session.call_tool(tool, {}, input_responses=answer, request_state=state)
        assert text_of(done) == "Hello, Ada!"
        with pytest.raises(MCPError) as replayed:
            await c.session.call_tool(tool, {}, input_responses=answer, request_state=state)
        assert "already used" in replayed.value.error.message


@pytest.mark.anyio
async def test_a_question_the_client_cannot_answer_is_missing_capability(http_server):
    # No sampling callback: the client does not declare sampling.
    async with client(http_server) as c:
        with pytest.raises(MCPError) as refused:
            await c.call_tool("test_missing_capability", {})
        assert refused.value.error.code == MISSING_CLIENT_CAPABILITY
        assert "sampling" in refused.value.error.data["requiredCapabilities"]


@pytest.mark.anyio
async def test_a_2025_session_answers_the_same_question_by_a_real_elicitation(http_server):
    asked = []
    callback = answering({"name": "Grace"}, asked)
    async with client(http_server, mode="legacy", elicitation_callback=callback) as c:
        result = await c.call_tool("test_input_required_result_elicitation", {})
        assert not result.is_error, text_of(result)
        assert text_of(result) == "Hello, Grace!"
    assert asked == ["What is your name?"]
