"""Approvals for MCP 2026-07-28 clients through input-required results, driven by the official
MCP Python SDK: the call ends asking the question as an elicitation, the SDK asks the person
(the elicitation callback) and retries with the answer and the signed request state."""

import shutil
import tempfile

import httpx2
import pytest
from mcp import Client, MCPError, types
from mcp.client.streamable_http import streamable_http_client

from conftest import CONFORMANCE, AsyncRelayed, HttpServer, as_another_user

# -32021: the request needs a client capability the client did not declare.
MISSING_CLIENT_CAPABILITY = -32021
INVALID_PARAMS = -32602


@pytest.fixture(scope="module")
def http_server():
    """A server on the conformance fixture, whose approval tools need a person's approval."""
    data = tempfile.mkdtemp(prefix="chitin-mcp-input-required-")
    server = HttpServer(["--components", str(CONFORMANCE)], data)
    yield server
    server.stop()
    shutil.rmtree(data, ignore_errors=True)


def client(server, relay=None, **kwargs) -> Client:
    """An SDK client; with `relay` (a port from `as_another_user`) its connections go through
    it, so to the server it is another client than this test's own."""
    transport = AsyncRelayed(relay) if relay else None
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {server.token}"}, timeout=30, transport=transport
    )
    return Client(streamable_http_client(server.url, http_client=http), mode="auto", **kwargs)


def text_of(result) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


def answering(action, asked):
    async def answer(context, params):
        asked.append(params.message)
        if action == "accept":
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action=action)

    return answer


@pytest.mark.anyio
@pytest.mark.parametrize("tool", ["test_approval", "test_component_approval"])
async def test_an_approval_answered_through_input_required_runs_the_call(http_server, tool):
    asked = []
    async with client(http_server, elicitation_callback=answering("accept", asked)) as c:
        result = await c.call_tool(tool, {})
        assert not result.is_error, text_of(result)
        assert "approved" in text_of(result)
    assert len(asked) == 1 and f"`{tool}`" in asked[0], asked


@pytest.mark.anyio
async def test_a_refused_approval_is_a_permission_denied_result(http_server):
    asked = []
    async with client(http_server, elicitation_callback=answering("decline", asked)) as c:
        result = await c.call_tool("test_approval", {})
        assert result.is_error
        assert text_of(result).startswith("permission-denied:")
        assert "declined" in text_of(result)
    assert len(asked) == 1


async def first_round(c):
    """The input-required result of a call needing approval, without answering it."""
    first = await c.session.call_tool("test_approval", {}, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult), first
    assert set(first.input_requests) == {"approval"}
    assert first.request_state
    return first


APPROVED = {"approval": types.ElicitResult(action="accept", content={"approve": True})}


@pytest.mark.anyio
async def test_a_tampered_or_replayed_request_state_is_refused(http_server):
    async def never(context, params):
        raise AssertionError("this test answers by hand")

    async with client(http_server, elicitation_callback=never) as c:
        first = await first_round(c)
        state = first.request_state
        tampered = state[:-2] + ("AA" if not state.endswith("AA") else "BB")
        with pytest.raises(MCPError) as refused:
            await c.session.call_tool(
                "test_approval", {}, input_responses=APPROVED, request_state=tampered
            )
        assert refused.value.error.code == INVALID_PARAMS
        assert "request state was refused" in refused.value.error.message

        # A state is bound to the tool and its arguments.
        with pytest.raises(MCPError) as foreign:
            await c.session.call_tool(
                "test_component_approval", {}, input_responses=APPROVED, request_state=state
            )
        assert "request state was refused" in foreign.value.error.message

        # The genuine state runs the call once; its replay is refused.
        done = await c.session.call_tool(
            "test_approval", {}, input_responses=APPROVED, request_state=state
        )
        assert not done.is_error, text_of(done)
        with pytest.raises(MCPError) as replayed:
            await c.session.call_tool(
                "test_approval", {}, input_responses=APPROVED, request_state=state
            )
        assert "already used" in replayed.value.error.message


@pytest.mark.anyio
async def test_a_request_state_serves_only_the_client_it_was_issued_to(http_server):
    async def never(context, params):
        raise AssertionError("this test answers by hand")

    with as_another_user(http_server) as relay:
        async with client(http_server, relay, elicitation_callback=never) as owner, client(
            http_server, elicitation_callback=never
        ) as stranger:
            await one_state_one_client(owner, stranger)


async def one_state_one_client(owner, stranger):
    """A state issued to `owner` serves it only."""
    state = (await first_round(owner)).request_state
    # Another client that learnt the state cannot run the call on its answers.
    with pytest.raises(MCPError) as refused:
        await stranger.session.call_tool(
            "test_approval", {}, input_responses=APPROVED, request_state=state
        )
    assert refused.value.error.code == INVALID_PARAMS
    assert "issued to this client" in refused.value.error.message
    # The refusal spent nothing: the client asked still runs the call with it.
    done = await owner.session.call_tool(
        "test_approval", {}, input_responses=APPROVED, request_state=state
    )
    assert not done.is_error, text_of(done)


@pytest.mark.anyio
async def test_a_client_without_elicitation_gets_missing_capability(http_server):
    async with client(http_server) as c:
        with pytest.raises(MCPError) as refused:
            await c.call_tool("test_approval", {})
        assert refused.value.error.code == MISSING_CLIENT_CAPABILITY
        assert "elicitation" in refused.value.error.data["requiredCapabilities"]


@pytest.mark.anyio
async def test_an_always_answer_is_remembered_and_not_asked_again():
    # A server of its own: the remembered approval outlives the call.
    data = tempfile.mkdtemp(prefix="chitin-mcp-input-required-always-")
    server = HttpServer(["--components", str(CONFORMANCE)], data)
    try:
        asked = []

        async def always(context, params):
            asked.append(params.message)
            return types.ElicitResult(action="accept", content={"approve": True, "always": True})

        async with client(server, elicitation_callback=always) as c:
            first = await c.call_tool("test_approval", {})
            assert not first.is_error, text_of(first)
            second = await c.call_tool("test_approval", {})
            assert not second.is_error, text_of(second)
        assert len(asked) == 1, asked
    finally:
        server.stop()
        shutil.rmtree(data, ignore_errors=True)
