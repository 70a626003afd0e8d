"""A tool that runs only as a task (`task = "required"`) gathers its input through
input-required rounds and only then becomes a task (SEP-2663 composed with SEP-2322), driven by
the official MCP Python SDK in the 2026-07-28 mode: the SDK answers the input-required round,
and a small client extension claims the `task` result and polls `tasks/get` to its end."""

import shutil
import tempfile
from typing import Any, Literal

import anyio
import httpx2
import pytest
from mcp import Client, types
from mcp.client import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from pydantic import TypeAdapter

from conftest import FIXTURES, HttpServer

TASKS = "io.modelcontextprotocol/tasks"


@pytest.fixture(scope="module")
def http_server():
    """A server on the tasks fixture, whose `test_tool_with_task` asks for a name."""
    data = tempfile.mkdtemp(prefix="chitin-mcp-task-after-input-")
    server = HttpServer(["--components", str(FIXTURES / "test-conformance-tasks.wasm")], data)
    yield server
    server.stop()
    shutil.rmtree(data, ignore_errors=True)


class TaskCreated(types.Result):
    """The `task` result of a call that became a task (SEP-2663)."""

    result_type: Literal["task"]
    task_id: str
    status: str


class GetTask(types.Request[dict[str, Any], Literal["tasks/get"]]):
    name_param = "taskId"


class Tasks(ClientExtension):
    """Declares the tasks extension; resolves a `task` result by polling it to its end,
    recording what was seen."""

    identifier = TASKS

    def __init__(self):
        self.created: list[TaskCreated] = []

    def claims(self):
        return [ResultClaim(result_type="task", model=TaskCreated, resolve=self.resolve)]

    async def resolve(self, created: TaskCreated, ctx: ClaimContext) -> types.CallToolResult:
        self.created.append(created)
        with anyio.fail_after(30):
            while True:
                task = await ctx.session.send_request(
                    GetTask(method="tasks/get", params={"taskId": created.task_id}),
                    TypeAdapter(dict[str, Any]),
                )
                if task["status"] == "completed":
                    return types.CallToolResult.model_validate(task["result"])
                assert task["status"] == "working", task
                await anyio.sleep(0.1)


@pytest.mark.anyio
async def test_a_required_task_tool_asks_first_then_becomes_a_task_with_the_answer(http_server):
    asked = []

    async def answer(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Alice"})

    tasks = Tasks()
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {http_server.token}"}, timeout=30)
    transport = streamable_http_client(http_server.url, http_client=http)
    async with Client(transport, elicitation_callback=answer, extensions=[tasks]) as c:
        result = await c.call_tool("test_tool_with_task", {})
    text = "".join(block.text for block in result.content if block.type == "text")
    assert not result.is_error, text
    assert "Alice" in text
    # One input-required round asked the question; its answered retry became the task.
    assert asked == ["What is your name?"]
    assert len(tasks.created) == 1 and tasks.created[0].task_id
