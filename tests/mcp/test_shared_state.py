"""One data directory, many chitin processes: two `chitin serve` on stdio and a `chitin serve
--http`, driven by the official MCP Python SDK, interleave memory writes, searches and reads
while a terminal writes memory, sets a secret, revokes an approval and installs a component.
Every process sees what the others wrote on its next read."""

import json
import os
import pathlib
import shutil
import subprocess
import tempfile

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client

from conftest import CACHE, CHITIN, COMPONENTS, FIXTURES, REPO, HttpServer

ROUNDS = 4


def env_for(data) -> dict:
    # The workspace beside the data directory, never holding it (chitin refuses that).
    workspace = pathlib.Path(data) / "workspace"
    workspace.mkdir(exist_ok=True)
    return {
        "CHITIN_DATA_DIR": str(data),
        "CHITIN_WORKSPACE": str(workspace),
        # The development key that signed the built components (`just build-components`).
        "CHITIN_TRUSTED_KEYS": str(REPO / "build" / "trusted_keys"),
        "CHITIN_CACHE_DIR": CACHE,
        "PATH": os.environ.get("PATH", ""),
    }


def terminal(data, *args, stdin=None):
    """Run the chitin CLI on `data`, as the operator would in a terminal beside the servers."""
    done = subprocess.run(
        [str(CHITIN), *args], env=env_for(data), cwd=data, input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, f"chitin {args}: {done.stdout}{done.stderr}"
    return done.stdout


def text_of(result) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


@pytest.fixture
def shared():
    """A data directory with memory and http installed from the local registry (which also
    holds json), the arguments the servers take, and an HTTP server on it."""
    data = pathlib.Path(tempfile.mkdtemp(prefix="chitin-mcp-shared-"))
    for name in ("memory", "http", "json"):
        terminal(data, "publish", str(COMPONENTS / f"{name}.wasm"), "--registry", "local")
    for name in ("memory", "http"):
        terminal(data, "install", f"chitin/{name}", "--yes")
    args = [
        "--components", str(data / "components"),
        "--components", str(FIXTURES / "test-http.wasm"),
    ]
    http = HttpServer(args, data)
    yield data, args, http
    http.stop()
    shutil.rmtree(data, ignore_errors=True)


class Session:
    """One MCP session and what it saw: approval requests and tools/list_changed."""

    def __init__(self, name):
        self.name = name
        self.asked = 0
        self.always = False
        self.changed = anyio.Event()

    async def elicit(self, context, params):
        self.asked += 1
        return types.ElicitResult(
            action="accept", content={"approve": True, "always": self.always}
        )

    async def on_message(self, message):
        if isinstance(message, types.ToolListChangedNotification):
            self.changed.set()


def stdio_client(data, args, session) -> Client:
    params = StdioServerParameters(
        command=str(CHITIN), args=["serve", *args], env=env_for(data), cwd=str(data)
    )
    return Client(
        params, mode="legacy",
        elicitation_callback=session.elicit, message_handler=session.on_message,
    )


def http_client(server, session) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {server.token}"}, timeout=60)
    return Client(
        streamable_http_client(server.url, http_client=http), mode="legacy",
        elicitation_callback=session.elicit, message_handler=session.on_message,
    )


async def call(client, tool, args):
    result = await client.call_tool(tool, args)
    assert not result.is_error, f"{tool} {args}: {text_of(result)}"
    return result.structured_content


@pytest.mark.anyio
async def test_every_process_sees_what_the_others_wrote(shared):
    data, args, http = shared
    sa, sb, sc = Session("a"), Session("b"), Session("c")
    async with (
        stdio_client(data, args, sa) as a,
        stdio_client(data, args, sb) as b,
        http_client(http, sc) as c,
    ):
        clients = {"a": a, "b": b, "c": c}

        # Memory: every process writes its own document, interleaved, while the terminal writes.
        written = {name: [] for name in [*clients, "terminal"]}
        for i in range(ROUNDS):
            for name, client in clients.items():
                line = f"{name} wrote line {i} sharedmarker{name}{i}\n"
                await call(client, "memory_write", {"content": line, "target": f"{name}.md"})
                written[name].append(line)
            line = f"terminal wrote line {i} sharedmarkerterminal{i}\n"
            write = json.dumps({"content": line, "target": "terminal.md"})
            await anyio.to_thread.run_sync(
                lambda: terminal(data, "call", "memory_write", write, *args)
            )
            written["terminal"].append(line)
        for reader in clients.values():
            for name, lines in written.items():
                doc = await call(reader, "memory_read", {"path": f"{name}.md"})
                for line in lines:
                    assert line in doc["content"], f"{line!r} missing from {name}.md"
                found = await call(
                    reader, "memory_search", {"query": f"sharedmarker{name}{ROUNDS - 1}"}
                )
                assert f"{name}.md" in json.dumps(found), found

        # A secret set in the terminal is there for every server's next call.
        for client in clients.values():
            assert (await call(client, "secret_exists", {"name": "test_shared"}))["exists"] is False
        await anyio.to_thread.run_sync(
            lambda: terminal(data, "secret", "set", "test_shared", stdin="shared-secret-value\n")
        )
        for client in clients.values():
            assert (await call(client, "secret_exists", {"name": "test_shared"}))["exists"] is True

        # "Always allow" remembered by one server holds for the others; revoked in the
        # terminal, every server asks again on its next call. The request itself is refused
        # (a loopback address): only the asking matters here.
        blocked = {"method": "GET", "url": "https://127.0.0.1:9/"}
        sa.always = True
        await a.call_tool("http", blocked)
        assert sa.asked == 1
        await b.call_tool("http", blocked)
        await c.call_tool("http", blocked)
        assert (sb.asked, sc.asked) == (0, 0), "the approval a remembered was not seen"
        listed = await anyio.to_thread.run_sync(lambda: terminal(data, "approvals", "list"))
        assert "chitin/http/http" in listed, listed
        await anyio.to_thread.run_sync(lambda: terminal(data, "approvals", "revoke", "http"))
        sa.always = False
        for session, client in ((sa, a), (sb, b), (sc, c)):
            before = session.asked
            await client.call_tool("http", blocked)
            assert session.asked == before + 1, f"{session.name} did not ask after the revoke"

        # An install in the terminal reaches every running server, and so does a removal.
        for client in clients.values():
            assert "json" not in {t.name for t in (await client.list_tools()).tools}
        await anyio.to_thread.run_sync(lambda: terminal(data, "install", "chitin/json", "--yes"))
        for session, client in ((sa, a), (sb, b), (sc, c)):
            with anyio.fail_after(20):
                await session.changed.wait()
            session.changed = anyio.Event()
            assert "json" in {t.name for t in (await client.list_tools()).tools}
        await anyio.to_thread.run_sync(lambda: terminal(data, "remove", "chitin/json"))
        for session, client in ((sa, a), (sb, b), (sc, c)):
            with anyio.fail_after(20):
                await session.changed.wait()
            assert "json" not in {t.name for t in (await client.list_tools()).tools}
