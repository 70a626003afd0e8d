"""Host faults over MCP, driven by the official Python SDK: a database or secret store failing
under a running call is a JSON-RPC error naming what failed, not a tool result with isError, and
the tools that do not need it keep working."""

import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest
from mcp import Client, MCPError, StdioServerParameters

from conftest import CACHE, CHITIN, COMPONENTS, FIXTURES, REPO


def server(data: pathlib.Path, secrets_key: str | None = None) -> StdioServerParameters:
    assert CHITIN.is_file(), f"{CHITIN} missing: cargo build --bin chitin (just test does)"
    workspace = data / "workspace"
    workspace.mkdir(exist_ok=True)
    env = {
        "CHITIN_DATA_DIR": str(data),
        "CHITIN_WORKSPACE": str(workspace),
        # The development key that signed the built components (`just build-components`).
        "CHITIN_TRUSTED_KEYS": str(REPO / "build" / "trusted_keys"),
        "CHITIN_CACHE_DIR": CACHE,
        "PATH": os.environ.get("PATH", ""),
    }
    if secrets_key is not None:
        env["CHITIN_SECRETS_KEY"] = secrets_key
    args = [
        "serve",
        "--components", str(COMPONENTS / "memory.wasm"),
        "--components", str(COMPONENTS / "echo.wasm"),
        "--components", str(FIXTURES / "test-http.wasm"),
    ]
    return StdioServerParameters(command=str(CHITIN), args=args, env=env)


@pytest.fixture
def data():
    path = pathlib.Path(tempfile.mkdtemp(prefix="chitin-mcp-fault-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.anyio
async def test_a_broken_database_is_a_json_rpc_error_naming_the_file(data):
    db = data / "chitin.db"
    db.write_bytes(b"this is not a database")
    async with Client(server(data)) as client:
        with pytest.raises(MCPError) as fault:
            await client.call_tool("memory_write", {"content": "a note"})
        assert "host fault" in fault.value.error.message
        assert str(db) in fault.value.error.message
        # The secret store lives in the same database: reading the secrets a call could reach
        # fails before the call runs.
        with pytest.raises(MCPError) as fault:
            await client.call_tool("secret_exists", {"name": "test_token"})
        assert str(db) in fault.value.error.message
        echoed = await client.call_tool("echo", {"message": "still here"})
        assert not echoed.is_error


@pytest.mark.anyio
async def test_a_secret_store_under_another_key_is_a_json_rpc_error(data):
    # A store created under one master key (the file `chitin secret set` makes), served under
    # another.
    workspace = data / "workspace"
    workspace.mkdir()
    env = {
        "CHITIN_DATA_DIR": str(data),
        "CHITIN_WORKSPACE": str(workspace),
        "CHITIN_TRUSTED_KEYS": str(REPO / "build" / "trusted_keys"),
        "CHITIN_CACHE_DIR": CACHE,
        "PATH": os.environ.get("PATH", ""),
    }
    subprocess.run(
        [str(CHITIN), "secret", "set", "unrelated"],
        input=b"value-0123456789\n",
        env=env,
        check=True,
        timeout=120,
    )
    async with Client(server(data, secrets_key="11" * 32)) as client:
        with pytest.raises(MCPError) as fault:
            await client.call_tool("secret_exists", {"name": "test_token"})
        assert "host fault" in fault.value.error.message
        assert "does not match the secrets store" in fault.value.error.message
        written = await client.call_tool("memory_write", {"content": "a note"})
        assert not written.is_error
