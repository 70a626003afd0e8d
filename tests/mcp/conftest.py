"""Shared fixtures of the MCP client tests: where the binary and components are, and a running
`chitin serve --http` on a free loopback port."""

import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import time

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
