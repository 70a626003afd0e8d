"""Mean round trip of `tools/call` echo over stdio, one call at a time, client included, and the
server's CPU time a call: an A/B
driver for two `chitin` binaries on the same machine (`docs/performance.md`).

    python3 host/benches/ab/stdio_echo.py target/release/chitin 4000

Run from the repository root after `just build-components`; the data directory and workspace
are fresh temporary directories (removed at the end), the trusted keys those of the build."""

import json
import os
import subprocess
import sys
import time

from scratch_dirs import scratch_env

chitin, calls = sys.argv[1], int(sys.argv[2])
_, env = scratch_env("chitin-ab-")
server = subprocess.Popen(
    [chitin, "serve", "--no-watch", "--components", "build/components/echo.wasm"],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)


def send(message):
    server.stdin.write((json.dumps(message) + "\n").encode())
    server.stdin.flush()


send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "ab", "version": "0"}}})
server.stdout.readline()
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
line = (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"message": "hello"}}}) + "\n").encode()
for _ in range(200):
    server.stdin.write(line)
    server.stdin.flush()
    server.stdout.readline()


def cpu_seconds():
    """The server's user and system CPU time so far (from /proc, in clock ticks)."""
    with open(f"/proc/{server.pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


cpu = cpu_seconds()
started = time.monotonic()
for _ in range(calls):
    server.stdin.write(line)
    server.stdin.flush()
    assert b'"hello"' in server.stdout.readline()
wall = time.monotonic() - started
cpu = cpu_seconds() - cpu
print(f"{chitin}: {wall / calls * 1e6:.1f} µs a call, server CPU {cpu / calls * 1e6:.1f} µs a call"
      f" (mean of {calls})")
server.stdin.close()
server.wait()
