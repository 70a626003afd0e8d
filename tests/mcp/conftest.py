"""Shared fixtures of the MCP client tests: where the binary and components are, and a running
`chitin serve --http` on a free loopback port."""

import contextlib
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import time

import httpx2
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
TARGET = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
CHITIN = pathlib.Path(os.environ.get("CHITIN_BIN", TARGET / "debug" / "chitin"))
COMPONENTS = REPO / "build" / "components"
FIXTURES = REPO / "build" / "fixtures"
HOSTILE = FIXTURES / "test-hostile.wasm"
CONFORMANCE = FIXTURES / "test-conformance.wasm"
# The compile cache every chitin of a test run shares (the Rust tests' too): each component
# compiles once in a run, not once per data directory. Entries are keyed by code and engine
# settings, so sharing never changes what a server loads.
CACHE = str(TARGET / "tmp" / "compile-cache")


@pytest.fixture
def anyio_backend():
    return "asyncio"


class HttpServer:
    """A `chitin serve --http` child process; `url`, `token`, `host` (host:port) and its stderr."""

    def __init__(self, args, data_dir):
        assert CHITIN.is_file(), f"{CHITIN} missing: cargo build --bin chitin (just test does)"
        self.data_dir = pathlib.Path(data_dir)
        self.stderr_path = self.data_dir / "serve.stderr"
        self.stderr = open(self.stderr_path, "w+")
        # A workspace beside the data directory unless the test names one (`--workspace` wins
        # over the variable): never the data directory, nor the repository holding the trust store.
        workspace = self.data_dir / "workspace"
        workspace.mkdir(exist_ok=True)
        env = {
            "CHITIN_DATA_DIR": str(self.data_dir),
            "CHITIN_WORKSPACE": str(workspace),
            # The development key that signed the built components (`just build-components`).
            "CHITIN_TRUSTED_KEYS": str(REPO / "build" / "trusted_keys"),
            "CHITIN_CACHE_DIR": CACHE,
            "PATH": os.environ.get("PATH", ""),
        }
        self.process = subprocess.Popen(
            [str(CHITIN), "serve", "--http", "127.0.0.1:0", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.stderr,
            env=env,
        )
        # A start compiles every component into a cold cache: bounded, but generous for a busy
        # 2-core machine (a start bound, not a timing goal).
        deadline = time.monotonic() + 300
        while True:
            text = self.log()
            found = re.search(r"at http://(127\.0\.0\.1:\d+)/mcp", text)
            if found:
                break
            assert self.process.poll() is None, f"chitin serve exited:\n{text}"
            assert time.monotonic() < deadline, f"chitin serve did not start:\n{text}"
            time.sleep(0.05)
        self.host = found.group(1)
        self.url = f"http://{self.host}/mcp"
        self.token = (self.data_dir / "http-token").read_text().strip()

    def log(self) -> str:
        return self.stderr_path.read_text()

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.stderr.close()


# A TCP relay to 127.0.0.1:PORT (argv[1]) on a port of its own, which it prints. Run as another
# user, the connections it opens to the server are that user's.
RELAY = """
import asyncio, sys

async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()

async def relay(reader, writer):
    upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", int(sys.argv[1]))
    await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

async def main():
    server = await asyncio.start_server(relay, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()

asyncio.run(main())
"""


class Relayed(httpx2.HTTPTransport):
    """Sends each request to `port` (the relay's), its `Host` still the server's own."""

    def __init__(self, port):
        super().__init__()
        self.port = port

    def handle_request(self, request):
        request.url = request.url.copy_with(port=self.port)
        return super().handle_request(request)


class AsyncRelayed(httpx2.AsyncHTTPTransport):
    """[`Relayed`] for async clients."""

    def __init__(self, port):
        super().__init__()
        self.port = port

    async def handle_async_request(self, request):
        request.url = request.url.copy_with(port=self.port)
        return await super().handle_async_request(request)


@contextlib.contextmanager
def as_another_user(server, uid=65534):
    """The port of a relay to `server` run by the user `uid` (`nobody`): every loopback address is this
    machine, one client for each user owning a socket, so another client is another user's
    (connect through [`Relayed`] or [`AsyncRelayed`]). Skips the test where another user's
    process cannot be started (not root)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("another user's connections need root and setpriv")
    relay = subprocess.Popen(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
         "/usr/bin/python3", "-c", RELAY, server.host.rsplit(":", 1)[1]],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd="/",
    )
    try:
        yield int(relay.stdout.readline())
    finally:
        relay.kill()
        relay.wait()


@pytest.fixture(scope="module")
def http_server():
    data = tempfile.mkdtemp(prefix="chitin-mcp-http-")
    workspace = pathlib.Path(data) / "workspace"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("first line\nsecond line\n")
    # A fuel budget no call here can burn through: the cancellation test needs `spin` still
    # running when it cancels, and on a quiet machine the default budget runs out in under 1 s.
    policy = pathlib.Path(data) / "policy.toml"
    text = (REPO / "policies" / "default.toml").read_text()
    policy.write_text(text.replace("fuel = 5000000000", "fuel = 500000000000"))
    server = HttpServer(
        [
            "-v",
            "--policy", str(policy),
            "--workspace", str(workspace),
            "--page-size", "5",
            "--components", str(COMPONENTS),
            "--components", str(HOSTILE),
            "--components", str(CONFORMANCE),
        ],
        data,
    )
    yield server
    server.stop()
    shutil.rmtree(data, ignore_errors=True)
