"""Round trips of `tools/call` over stdio when each call comes after a pause, as an agent's do
(the model thinks for seconds between calls): an A/B driver for `chitin` binaries on the same
machine (`docs/performance.md`). A call after a pause finds the server's threads asleep; the
benches' back-to-back loops never do.

    python3 host/benches/ab/after_pause.py target/release/chitin shell 15 1.3

TOOL is `echo` (`{"message": "hello"}`), `shell` (`{"command": "true"}`, approved once with
"always" through the client's elicitation, as a person would), or `ping` (MCP's `ping`, with the
echo component loaded). Prints the median, fastest and slowest of N calls, each after GAP
seconds without one, and of N calls back to back. Run from the repository root after `just
build-components`; the data directory and workspace are fresh temporary directories (removed at
the end), the trusted keys those of the build. Goal 1's native floor answers the same loop when
BINARY is the goals bench's executable with `CHITIN_BENCH_ROLE=stdio-floor` set:

    CHITIN_BENCH_ROLE=stdio-floor python3 host/benches/ab/after_pause.py \
        target/release/deps/goals-HASH echo 15 1.3
"""

import json
import os
import subprocess
import sys
import time

from scratch_dirs import scratch_env

chitin, tool, calls, gap = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
request = {
    "echo": {"method": "tools/call", "params": {"name": "echo", "arguments": {"message": "hello"}}},
    "shell": {"method": "tools/call", "params": {"name": "shell", "arguments": {"command": "true"}}},
    "ping": {"method": "ping"},
}[tool]
component = "echo" if tool == "ping" else tool
_, env = scratch_env("chitin-ab-")
server = subprocess.Popen(
    [chitin, "serve", "--no-watch", "--components", f"build/components/{component}.wasm"],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)


def send(message):
    server.stdin.write((json.dumps(message) + "\n").encode())
    server.stdin.flush()


line = (json.dumps({"jsonrpc": "2.0", "id": 1, **request}) + "\n").encode()


def call():
    """One call's round trip in seconds, the client's own work kept to a write and a read; a
    question from the server is answered "always"."""
    started = time.perf_counter()
    server.stdin.write(line)
    server.stdin.flush()
    while True:
        answer = server.stdout.readline()
        if b'"elicitation/create"' in answer:
            question = json.loads(answer)
            send({"jsonrpc": "2.0", "id": question["id"], "result": {
                "action": "accept", "content": {"approve": True, "always": True}}})
            continue
        assert b'"result"' in answer and b'"isError":true' not in answer, answer
        return time.perf_counter() - started


def summary(times):
    times = sorted(times)
    return (f"p50 {times[len(times) // 2] * 1e6:.0f} µs (fastest {times[0] * 1e6:.0f}, "
            f"slowest {times[-1] * 1e6:.0f})")


send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}},
    "clientInfo": {"name": "ab", "version": "0"}}})
server.stdout.readline()
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
for _ in range(50):
    call()
paused = []
for _ in range(calls):
    time.sleep(gap)
    paused.append(call())
back_to_back = [call() for _ in range(calls)]
print(f"{chitin} {tool}: after {gap} s {summary(paused)}; back to back {summary(back_to_back)}"
      f" ({calls} calls each)")
server.stdin.close()
server.wait()
