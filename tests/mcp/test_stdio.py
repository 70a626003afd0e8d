"""chitin serve over stdio, driven by the official MCP Python SDK as an independent client."""

import atexit
import json
import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest
from mcp import Client, MCPError, StdioServerParameters, types

from conftest import CACHE, CHITIN, COMPONENTS, HOSTILE, REPO

DATA = tempfile.mkdtemp(prefix="chitin-mcp-test-")
# Every folder the tests make is inside DATA, removed when the run ends.
atexit.register(shutil.rmtree, DATA, ignore_errors=True)
MODES = ["legacy", "auto"]


def server(*extra: str) -> StdioServerParameters:
    assert CHITIN.is_file(), f"{CHITIN} missing: cargo build --bin chitin (just test does)"
    assert COMPONENTS.is_dir(), f"{COMPONENTS} missing: just build-components"
    args = ["serve", "--components", str(COMPONENTS), "--components", str(HOSTILE), *extra]
    # A workspace beside the data directory unless the test names one (`--workspace` wins over
    # the variable): never the data directory, nor the repository holding the trust store.
    workspace = pathlib.Path(DATA) / "workspace"
    workspace.mkdir(exist_ok=True)
    env = {
        "CHITIN_DATA_DIR": DATA,
        "CHITIN_WORKSPACE": str(workspace),
        # The development key that signed the built components (`just build-components`).
        "CHITIN_TRUSTED_KEYS": str(REPO / "build" / "trusted_keys"),
        "CHITIN_CACHE_DIR": CACHE,
        "PATH": os.environ.get("PATH", ""),
    }
    return StdioServerParameters(command=str(CHITIN), args=args, env=env)


def text_of(result) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_lists_tools_sorted_with_annotations_and_schemas(mode):
    async with Client(server(), mode=mode) as client:
        listed = await client.list_tools()
        names = [tool.name for tool in listed.tools]
        assert names == sorted(names)
        assert {"echo", "json", "time", "spin", "ok"} <= set(names)
        assert listed.next_cursor is None
        echo = next(tool for tool in listed.tools if tool.name == "echo")
        assert echo.annotations.read_only_hint is True
        assert echo.input_schema["required"] == ["message"]
        assert echo.output_schema["type"] == "object"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_reading_a_resource_is_a_resource_not_found_naming_its_uri(mode):
    """chitin serves tools only: its resource list is empty, and a read of any URI is the
    resource-not-found error of SEP-2164 (invalid params, the URI in `data.uri`)."""
    async with Client(server(), mode=mode) as client:
        assert (await client.list_resources()).resources == []
        with pytest.raises(MCPError) as refused:
            await client.read_resource("file:///etc/passwd")
        assert refused.value.code == -32602, refused.value
        assert refused.value.data == {"uri": "file:///etc/passwd"}, refused.value
        assert "resource not found: file:///etc/passwd" in refused.value.message


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_call_returns_structured_content_and_text(mode):
    async with Client(server(), mode=mode) as client:
        result = await client.call_tool("echo", {"message": "hi from python"})
        assert not result.is_error
        assert result.structured_content == {"message": "hi from python"}
        assert json.loads(text_of(result)) == {"message": "hi from python"}


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_read_file_reads_the_workspace_and_nothing_outside(mode):
    workspace = pathlib.Path(tempfile.mkdtemp(prefix="ws-", dir=DATA))
    (workspace / "notes.txt").write_text("first line\nsecond line\n")
    async with Client(server("--workspace", str(workspace)), mode=mode) as client:
        result = await client.call_tool("read_file", {"path": "notes.txt"})
        assert not result.is_error, text_of(result)
        assert "second line" in json.dumps(result.structured_content)
        outside = await client.call_tool("read_file", {"path": "../../etc/passwd"})
        assert outside.is_error
        assert "invalid-path" in text_of(outside) or "permission-denied" in text_of(outside)


@pytest.mark.anyio
async def test_a_file_past_the_output_budget_reads_whole_in_pages_the_sdk_accepts():
    """read_file fits each result within the call's output budget (64 KiB by default, told in
    CHITIN_OUTPUT_BYTES), so every page is structured content the SDK validates against the
    tool's output schema; before, a file over 64 KiB came back cut mid-JSON and the SDK raised
    "has an output schema but did not return structured content"."""
    workspace = pathlib.Path(tempfile.mkdtemp(prefix="ws-", dir=DATA))
    # Escapes make the JSON longer than the text: quotes, tabs, backslashes, a control byte.
    text = "".join(f'{i}: "q"\t\\p\\ \x01 é {"x" * (i % 90)}\n' for i in range(4000))
    (workspace / "long.txt").write_bytes(text.encode())
    read, offset, pages = "", 0, 0
    async with Client(server("--workspace", str(workspace))) as client:
        while True:
            result = await client.call_tool("read_file", {"path": "long.txt", "offset": offset})
            assert not result.is_error, text_of(result)[:300]
            assert len(text_of(result).encode()) <= 65536
            page = result.structured_content
            read += page["content"]
            pages += 1
            if not page["truncated"]:
                break
            offset = page["next_offset"]
        # A search with more matches than fit keeps the ones that do, and says so.
        found = await client.call_tool("grep", {"pattern": "q", "max_results": 1000})
        assert not found.is_error, text_of(found)[:300]
        assert 100 < len(found.structured_content["matches"]) < 1000
        assert found.structured_content["truncated"] is True
    assert read == text
    assert pages >= 4, pages


@pytest.mark.anyio
async def test_a_result_the_host_cuts_is_an_error_carrying_its_text():
    """A tool that ignores its budget gets its result cut by the host: no longer the JSON its
    output schema promises, so it is an error result with the text and the marker, which the
    SDK hands over rather than rejecting."""
    async with Client(server()) as client:
        result = await client.call_tool("huge_output", {"bytes": 200_000})
        assert result.is_error
        assert result.structured_content is None
        body = text_of(result)
        assert body.startswith('{"data":"xxx'), body[:40]
        assert "[chitin: output truncated: showing 65536 of 200011 bytes]" in body, body[-120:]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_tool_errors_are_is_error_results_with_the_kind(mode):
    async with Client(server(), mode=mode) as client:
        bad = await client.call_tool("echo", {"message": 5})
        assert bad.is_error
        assert text_of(bad).startswith("invalid-args:")
        assert "/message" in text_of(bad)

        unknown = await client.call_tool("no_such_tool", {})
        assert unknown.is_error
        assert text_of(unknown).startswith("not-found:")

        trapped = await client.call_tool("panic", {})
        assert trapped.is_error
        assert "deliberate panic" in text_of(trapped)

        # The server carries on after each refusal.
        ok = await client.call_tool("ok", {})
        assert ok.structured_content == {"ok": True}


@pytest.mark.anyio
async def test_a_stdout_flood_does_not_corrupt_the_protocol_stream():
    async with Client(server(), mode="legacy") as client:
        result = await client.call_tool("stdout_flood", {"lines": 5000})
        assert result.structured_content == {"printed": 5000}
        again = await client.call_tool("echo", {"message": "still framed"})
        assert again.structured_content == {"message": "still framed"}


@pytest.mark.anyio
async def test_a_runaway_tool_times_out_under_the_policy():
    policy = pathlib.Path(DATA) / "fast.toml"
    text = (REPO / "policies" / "default.toml").read_text()
    policy.write_text(text.replace("timeout_ms = 30000", "timeout_ms = 300"))
    async with Client(server("--policy", str(policy)), mode="legacy") as client:
        result = await client.call_tool("spin", {})
        assert result.is_error
        assert text_of(result).startswith("timeout:")


def echo_needing_approval() -> pathlib.Path:
    """echo.wasm with a manifest whose `echo` tool asks for approval."""
    folder = pathlib.Path(tempfile.mkdtemp(prefix="approval-", dir=DATA))
    manifest = folder / "manifest.toml"
    text = (REPO / "components" / "echo" / "manifest.toml").read_text()
    manifest.write_text(text + '\n[tools.echo]\napproval = "ask"\n')
    out = folder / "echo.wasm"
    subprocess.run(
        [str(CHITIN), "manifest", "embed", str(COMPONENTS / "echo.wasm"), str(manifest), "-o", str(out)],
        check=True,
        env={"CHITIN_DATA_DIR": DATA, "PATH": os.environ.get("PATH", "")},
    )
    # Re-sign with the development key, in the data directory `just build-components` used.
    subprocess.run([str(CHITIN), "sign", str(out), "--key", "dev"], check=True, env=os.environ)
    return out


def approval_server() -> StdioServerParameters:
    params = server()
    params.args = ["serve", "--components", str(echo_needing_approval())]
    return params


@pytest.mark.anyio
async def test_a_call_needing_approval_runs_once_the_person_approves():
    asked = []

    async def approve(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    async with Client(approval_server(), mode="legacy", elicitation_callback=approve) as client:
        result = await client.call_tool("echo", {"message": "approved"})
        assert not result.is_error, text_of(result)
        assert result.structured_content == {"message": "approved"}
    assert len(asked) == 1 and "`echo`" in asked[0] and "approved" in asked[0]


@pytest.mark.anyio
async def test_a_declined_approval_is_a_permission_denied_result():
    async def decline(context, params):
        return types.ElicitResult(action="decline")

    async with Client(approval_server(), mode="legacy", elicitation_callback=decline) as client:
        result = await client.call_tool("echo", {"message": "no"})
        assert result.is_error
        assert text_of(result).startswith("permission-denied:")
        assert "declined" in text_of(result)


@pytest.mark.anyio
async def test_a_client_without_elicitation_gets_a_refusal_naming_the_tool_and_why():
    async with Client(approval_server(), mode="legacy") as client:
        result = await client.call_tool("echo", {"message": "no one to ask"})
        assert result.is_error
        text = text_of(result)
        assert text.startswith("permission-denied:")
        assert "`echo`" in text and "approval" in text and "elicitation" in text
