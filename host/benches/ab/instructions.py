"""Instructions a `tools/call` of echo costs the server, counted by valgrind's callgrind: the
same figure on a busy machine as on a quiet one, so two builds compare without interleaving.

    python3 host/benches/ab/instructions.py target/release/chitin stdio [CALLS]
    python3 host/benches/ab/instructions.py target/release/chitin http [CALLS]

Run from the repository root after `just build-components`. The server runs under callgrind
twice, for CALLS and for 3 × CALLS calls one at a time (default 1000), over stdio (a session
that began with `initialize`) or over Streamable HTTP (stateless 2026-07-28 calls on one
kept-alive connection, on 127.0.0.1). The difference of the two totals, divided by 2 × CALLS,
is the cost of one call without the server's start. The functions that account for most of it
follow (their own instructions, not their callees'). The data directory is kept between the
runs so components are compiled once, and removed at the end."""

import http.client
import json
import os
import re
import socket
import subprocess
import sys
import time

from scratch_dirs import scratch_env

binary, transport = sys.argv[1], sys.argv[2]
calls = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
data, env = scratch_env("chitin-instructions-")
components = ["--components", "build/components/echo.wasm"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stdio(wrap, n):
    server = subprocess.Popen(wrap + [binary, "serve", "--no-watch"] + components,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, env=env)

    def send(message):
        server.stdin.write((json.dumps(message) + "\n").encode())
        server.stdin.flush()

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "instructions", "version": "0"}}})
    server.stdout.readline()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    for _ in range(n):
        send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
              "params": {"name": "echo", "arguments": {"message": "hello"}}})
        assert b'"hello"' in server.stdout.readline()
    server.stdin.close()
    server.wait()


def over_http(wrap, n):
    port = free_port()
    server = subprocess.Popen(
        wrap + [binary, "serve", "--no-watch", "--http", f"127.0.0.1:{port}",
                "--rate-limit", "1000000", "--insecure-no-token"] + components,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    version = "2026-07-28"
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "echo", "arguments": {"message": "hello"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": version,
                  "io.modelcontextprotocol/clientCapabilities": {}}}})
    headers = {"Content-Type": "application/json",
               "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": version, "Mcp-Method": "tools/call", "Mcp-Name": "echo"}
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                connection.connect()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        for _ in range(n):
            connection.request("POST", "/mcp", body, headers)
            response = connection.getresponse()
            answer = response.read()
            assert response.status == 200 and b'"hello"' in answer, (response.status, answer)
        connection.close()
        server.terminate()
        server.wait()
    finally:
        # A failed run leaves no server behind.
        if server.poll() is None:
            server.kill()
            server.wait()


def self_costs(out):
    """Each function's own instructions in a callgrind output file, and the total."""
    text = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", out],
                          capture_output=True, text=True, check=True).stdout
    costs = {}
    for line in text.splitlines():
        match = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+(.*)$", line)
        if match:
            name = re.sub(r"\s*\[[^\]]*\]$", "", match.group(2))
            costs[name] = costs.get(name, 0) + int(match.group(1).replace(",", ""))
    return costs


run = stdio if transport == "stdio" else over_http
# Warmed under valgrind too: its CPU reports other features than the host's, and the compile
# cache keys compiled components by them, so a warm-up run natively would leave the first
# counted run to compile echo again.
run(["valgrind", "--tool=none"], 10)
outs = []
for n in (calls, 3 * calls):
    out = os.path.join(data, f"callgrind.{n}")
    run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"], n)
    outs.append(self_costs(out))
small, large = outs
per_call = {k: (large.get(k, 0) - small.get(k, 0)) / (2 * calls) for k in large}
total = per_call.pop("PROGRAM TOTALS")
print(f"{binary} over {transport}: {total:,.0f} instructions a call "
      f"(callgrind, {calls} and {3 * calls} calls)")
for name, cost in sorted(per_call.items(), key=lambda kv: -kv[1])[:15]:
    print(f"  {cost:8,.0f}  {name[:110]}")
