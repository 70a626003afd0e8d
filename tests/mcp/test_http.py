"""chitin serve --http (Streamable HTTP), driven by the official MCP Python SDK as a client, in
both spec eras: 2025-11-25 (initialize handshake, "legacy") and 2026-07-28 ("auto" discovers)."""

import json
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import time

import anyio
import httpx2
import pytest
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

from conftest import CACHE, CHITIN, COMPONENTS, REPO, HttpServer

MODES = ["legacy", "auto"]


def client(server, mode, **kwargs) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {server.token}"}, timeout=30)
    return Client(streamable_http_client(server.url, http_client=http), mode=mode, **kwargs)


def text_of(result) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


async def all_tools(c):
    """Every tool, following the pages; also returns the number of pages."""
    tools, cursor, pages = [], None, 0
    while True:
        page = await c.list_tools(cursor=cursor)
        tools += page.tools
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            return tools, pages


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_lists_every_tool_across_pages_in_order(http_server, mode):
    async with client(http_server, mode) as c:
        tools, pages = await all_tools(c)
        names = [t.name for t in tools]
        assert names == sorted(names)
        assert len(set(names)) == len(names)
        assert {"echo", "spin", "test_simple_text"} <= set(names)
        # The server runs with --page-size 5.
        assert pages == -(-len(names) // 5) and pages > 1
        echo = next(t for t in tools if t.name == "echo")
        assert echo.annotations.read_only_hint is True


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_calls_echo_with_structured_content(http_server, mode):
    async with client(http_server, mode) as c:
        result = await c.call_tool("echo", {"message": "over http"})
        assert not result.is_error
        assert result.structured_content == {"message": "over http"}
        assert json.loads(text_of(result)) == {"message": "over http"}


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_read_file_reads_the_workspace_and_nothing_outside(http_server, mode):
    async with client(http_server, mode) as c:
        result = await c.call_tool("read_file", {"path": "notes.txt"})
        assert not result.is_error, text_of(result)
        assert "second line" in json.dumps(result.structured_content)
        outside = await c.call_tool("read_file", {"path": "../serve.stderr"})
        assert outside.is_error
        assert "invalid-path" in text_of(outside) or "permission-denied" in text_of(outside)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_error_is_an_is_error_result(http_server, mode):
    async with client(http_server, mode) as c:
        bad = await c.call_tool("echo", {"message": 5})
        assert bad.is_error and text_of(bad).startswith("invalid-args:")
        failed = await c.call_tool("test_error_handling", {})
        assert failed.is_error
        assert "This tool intentionally returns an error for testing" in text_of(failed)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_content_blocks_from_a_component_reach_the_client(http_server, mode):
    async with client(http_server, mode) as c:
        mixed = await c.call_tool("test_multiple_content_types", {})
        assert [b.type for b in mixed.content] == ["text", "image", "resource"]
        assert mixed.content[1].mime_type == "image/png"
        assert mixed.content[2].resource.uri == "test://mixed-content-resource"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_progress_reports_arrive_during_the_call(http_server, mode):
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, total))

    async with client(http_server, mode) as c:
        result = await c.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
        assert not result.is_error
    assert seen == [(0, 100), (50, 100), (100, 100)]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_log_entries_arrive_as_log_messages(http_server, mode):
    messages = []

    async def on_log(params: types.LoggingMessageNotificationParams):
        messages.append(params.data)

    async with client(http_server, mode, logging_callback=on_log, log_level="info") as c:
        result = await c.call_tool("test_tool_with_logging", {})
        assert not result.is_error
    assert messages == ["Tool execution started", "Tool processing data", "Tool execution completed"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_cancelling_a_runaway_call_frees_it_within_a_second(http_server, mode):
    async with client(http_server, mode) as c:
        before = http_server.log().count("call cancelled by the client")
        with anyio.move_on_after(0.5):
            await c.call_tool("spin", {})
        cancelled_at = time.monotonic()
        while http_server.log().count("call cancelled by the client") == before:
            assert time.monotonic() - cancelled_at < 1.0, "the spinning call was not dropped"
            await anyio.sleep(0.02)
        # The server carries on.
        again = await c.call_tool("echo", {"message": "after cancel"})
        assert again.structured_content == {"message": "after cancel"}


def raw_post(server, headers):
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}}
    base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    return httpx2.post(server.url, json=body, headers={**base, **headers}, timeout=10)


def test_a_missing_or_wrong_token_is_refused(http_server):
    missing = raw_post(http_server, {})
    assert missing.status_code == 401
    assert "Bearer" in missing.headers["www-authenticate"]
    wrong = raw_post(http_server, {"Authorization": "Bearer " + "0" * len(http_server.token)})
    assert wrong.status_code == 401
    right = raw_post(http_server, {"Authorization": f"Bearer {http_server.token}"})
    assert right.status_code == 200
    # RFC 6750: the scheme's name is case-insensitive; another scheme is told what to send.
    for scheme in ("bearer", "BEARER"):
        either = raw_post(http_server, {"Authorization": f"{scheme} {http_server.token}"})
        assert either.status_code == 200, scheme
    basic = raw_post(http_server, {"Authorization": f"Basic {http_server.token}"})
    assert basic.status_code == 401
    assert "is not `Bearer <token>`" in basic.text


def raw_status(server, extra_headers):
    """The status line of an `initialize` sent by hand with `extra_headers` (lines)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}}).encode()
    host, port = server.host.rsplit(":", 1)
    head = "".join(f"{line}\r\n" for line in [
        "POST /mcp HTTP/1.1", *extra_headers, f"Authorization: Bearer {server.token}",
        "Content-Type: application/json", "Accept: application/json, text/event-stream",
        f"Content-Length: {len(body)}", "Connection: close",
    ])
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(head.encode() + b"\r\n" + body)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer.decode(errors="replace")


def test_a_second_host_or_origin_header_is_refused(http_server):
    own = http_server.host
    for headers in (
        [f"Host: {own}", "Host: evil.example"],
        [f"Host: {own}", f"Origin: http://{own}", "Origin: http://evil.example"],
    ):
        answer = raw_status(http_server, headers)
        assert answer.startswith("HTTP/1.1 400"), answer
        assert "more than one" in answer, answer
    assert raw_status(http_server, [f"Host: {own}"]).startswith("HTTP/1.1 200")


def test_a_foreign_host_or_origin_is_refused(http_server):
    auth = {"Authorization": f"Bearer {http_server.token}"}
    foreign_host = raw_post(http_server, {**auth, "Host": "evil.example:80"})
    assert foreign_host.status_code == 403
    foreign_origin = raw_post(http_server, {**auth, "Origin": "http://evil.example"})
    assert foreign_origin.status_code == 403
    own_origin = raw_post(http_server, {**auth, "Origin": f"http://{http_server.host}"})
    assert own_origin.status_code == 200


def test_a_body_over_one_mib_is_refused(http_server):
    huge = "x" * (1024 * 1024 + 1)
    response = httpx2.post(
        http_server.url,
        content=huge,
        headers={"Authorization": f"Bearer {http_server.token}",
                 "Content-Type": "application/json",
                 "Accept": "application/json, text/event-stream"},
        timeout=10,
    )
    assert response.status_code == 413


def test_a_client_over_its_rate_is_told_when_to_retry():
    data = tempfile.mkdtemp(prefix="chitin-mcp-rate-")
    server = HttpServer(["--rate-limit", "1", "--components", str(COMPONENTS / "echo.wasm")], data)
    try:
        auth = {"Authorization": f"Bearer {server.token}"}
        statuses = [raw_post(server, auth) for _ in range(5)]
        limited = [r for r in statuses if r.status_code == 429]
        assert statuses[0].status_code == 200
        assert limited, [r.status_code for r in statuses]
        assert int(limited[0].headers["retry-after"]) >= 1
        assert "rate limited" in limited[0].text
    finally:
        server.stop()
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture
def reloadable_server():
    """A server on a components directory holding only echo.wasm, and that directory."""
    data = tempfile.mkdtemp(prefix="chitin-mcp-reload-")
    components = pathlib.Path(data) / "components"
    components.mkdir()
    shutil.copy(COMPONENTS / "echo.wasm", components / "echo.wasm")
    server = HttpServer(["--components", str(components)], data)
    yield server, components
    server.stop()
    shutil.rmtree(data, ignore_errors=True)


@pytest.mark.anyio
async def test_adding_a_component_notifies_a_2025_session(reloadable_server):
    server, components = reloadable_server
    changed = anyio.Event()

    async def on_message(message):
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with client(server, "legacy", message_handler=on_message) as c:
        assert {t.name for t in (await c.list_tools()).tools} == {"echo"}
        shutil.copy(COMPONENTS / "time.wasm", components / "time.wasm")
        with anyio.fail_after(20):
            await changed.wait()
        assert {t.name for t in (await c.list_tools()).tools} == {"echo", "time"}


@pytest.mark.anyio
async def test_adding_a_component_notifies_a_2026_listener(reloadable_server):
    server, components = reloadable_server
    async with client(server, "auto") as c:
        assert {t.name for t in (await c.list_tools()).tools} == {"echo"}
        async with c.listen(tools_list_changed=True) as subscription:
            shutil.copy(COMPONENTS / "time.wasm", components / "time.wasm")
            with anyio.fail_after(20):
                event = await subscription.__aiter__().__anext__()
            assert type(event).__name__ == "ToolsListChanged"
        after = await c.list_tools(cache_mode="refresh")
        assert {t.name for t in after.tools} == {"echo", "time"}


def chitin_cli(data, *args):
    """Run the chitin CLI on data directory `data`, as the operator would beside the server."""
    workspace = pathlib.Path(data) / "cli-workspace"
    workspace.mkdir(exist_ok=True)
    env = {
        "CHITIN_DATA_DIR": str(data),
        "CHITIN_WORKSPACE": str(workspace),
        "CHITIN_TRUSTED_KEYS": str(REPO / "build" / "trusted_keys"),
        "CHITIN_CACHE_DIR": CACHE,
        "PATH": os.environ.get("PATH", ""),
    }
    done = subprocess.run(
        [str(CHITIN), *args], env=env, cwd=data, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, f"chitin {args}: {done.stdout}{done.stderr}"
    return done.stdout


@pytest.fixture
def installing_server():
    """A server on the installed components (echo installed from a directory registry that
    also holds time), the data directory and the registry."""
    data = pathlib.Path(tempfile.mkdtemp(prefix="chitin-mcp-install-"))
    registry = data / "registry-dir"
    for name in ("echo", "time"):
        chitin_cli(data, "publish", str(COMPONENTS / f"{name}.wasm"), "--registry", str(registry))
    chitin_cli(data, "install", "chitin/echo", "--registry", str(registry), "--yes")
    server = HttpServer(["--components", str(data / "components")], data)
    yield server, data, registry
    server.stop()
    shutil.rmtree(data, ignore_errors=True)


@pytest.mark.anyio
async def test_an_install_reaches_a_running_server(installing_server):
    server, data, registry = installing_server
    changed = anyio.Event()

    async def on_message(message):
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with client(server, "legacy", message_handler=on_message) as c:
        assert {t.name for t in (await c.list_tools()).tools} == {"echo"}
        out = await anyio.to_thread.run_sync(
            lambda: chitin_cli(data, "install", "chitin/time", "--registry", str(registry), "--yes")
        )
        assert "installed chitin/time" in out
        with anyio.fail_after(20):
            await changed.wait()
        assert {t.name for t in (await c.list_tools()).tools} == {"echo", "time"}


def test_a_stateless_call_whose_params_are_not_a_calls_is_told_what_is_wrong(http_server):
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
            "params": {"name": "echo", "arguments": [1], "_meta": meta}}
    response = httpx2.post(http_server.url, json=body, timeout=10, headers={
        "Authorization": f"Bearer {http_server.token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo",
    })
    reply = response.json()
    assert reply["id"] == 4, reply
    assert reply["error"]["code"] == -32602, reply
    assert "invalid tools/call params" in reply["error"]["message"], reply
