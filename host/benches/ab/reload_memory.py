"""The memory `chitin serve` holds across reloads: an A/B driver for `chitin` binaries on the same
machine (`docs/performance.md`, "A server's memory").

    python3 host/benches/ab/reload_memory.py target/release/chitin

Serves a watched directory holding the echo component, then copies the json, markdown and fs
components into it one at a time, as an install beside a running server does. Each copy makes
the server reload (a new engine; the new component compiled, the others from the cache). Prints
the resident memory from /proc once the server is ready and after each reload, then checks an
`echo` call still works. Run from the repository root after `just build-components`; the data
directory is removed at the end.
"""

import json
import os
import shutil
import subprocess
import sys
import time

from scratch_dirs import scratch_env

chitin = sys.argv[1]
data, env = scratch_env("chitin-reload-")
watched = os.path.join(data, "components")
os.mkdir(watched)
shutil.copy("build/components/echo.wasm", watched)
server = subprocess.Popen([chitin, "serve", "--components", watched], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)


def request(message):
    """Send `message` and return the answer with its id, skipping notifications."""
    server.stdin.write((json.dumps(message) + "\n").encode())
    server.stdin.flush()
    while True:
        answer = json.loads(server.stdout.readline())
        if answer.get("id") == message["id"]:
            return answer


def memory():
    fields = {}
    with open(f"/proc/{server.pid}/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "RssAnon"):
                fields[name] = int(value.split()[0]) / 1024
    return f"{fields['VmRSS']:.1f} MiB (anonymous {fields['RssAnon']:.1f})"


request({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "reload-memory", "version": "0"}}})
server.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
print(f"{chitin}: ready {memory()}")
for name in ["json", "markdown", "fs"]:
    before = len(request({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})["result"]["tools"])
    shutil.copy(f"build/components/{name}.wasm", watched)
    # The watcher waits for writes to settle, then the reload compiles the new component.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(1)
        tools = request({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})["result"]["tools"]
        if len(tools) != before or name == "markdown":
            break
    if name == "markdown":
        time.sleep(5)  # a library adds no tool: give its reload the time the others took
    print(f"  after adding {name}: {len(tools)} tools, {memory()}")
answer = request({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                  "params": {"name": "echo", "arguments": {"message": "hi"}}})
assert not answer["result"].get("isError"), answer
server.stdin.close()
server.wait()
