"""The memory `chitin serve` holds once it is ready: an A/B driver for `chitin` binaries on the
same machine (`docs/performance.md`, "A server's memory").

    python3 host/benches/ab/resident.py target/release/chitin 3

Starts `chitin serve` on stdio RUNS times on one fresh data directory, the way `just run` does
(the embedded default components, nothing passed), and after each start's answer to
`initialize` (the load is done by then) prints its resident memory from /proc: all of it, the
anonymous part (the heap, compiled code not yet cached), and the peak. The first start compiles
every component into the empty cache; the later ones load them from it. Then 200 `echo` calls,
and the same figures again. Run from the repository root after `just build-components`; the
data directory is removed at the end.
"""

import json
import subprocess
import sys

from scratch_dirs import scratch_env

chitin, runs = sys.argv[1], int(sys.argv[2])
_, env = scratch_env("chitin-resident-")


def memory(pid):
    """VmRSS, RssAnon and VmHWM of `pid`, in MiB."""
    fields = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "RssAnon", "VmHWM"):
                fields[name] = int(value.split()[0]) / 1024
    return f"{fields['VmRSS']:.1f} MiB (anonymous {fields['RssAnon']:.1f}, peak {fields['VmHWM']:.1f})"


for run in range(runs):
    server = subprocess.Popen([chitin, "serve", "--no-watch"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)

    def send(message):
        server.stdin.write((json.dumps(message) + "\n").encode())
        server.stdin.flush()
        return json.loads(server.stdout.readline())

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "resident", "version": "0"}}})
    ready = memory(server.pid)
    server.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    for i in range(200):
        answer = send({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                       "params": {"name": "echo", "arguments": {"message": "hello"}}})
        assert "result" in answer and not answer["result"].get("isError"), answer
    print(f"{chitin} start {run + 1} ({'compiles' if run == 0 else 'from the cache'}): "
          f"ready {ready}; after 200 calls {memory(server.pid)}")
    server.stdin.close()
    server.wait()
