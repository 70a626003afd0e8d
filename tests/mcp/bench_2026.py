"""MCP 2026-07-28 round trips against `chitin serve --http`: from the official Python SDK, a plain
call, a call whose approval goes through an input-required result (the question, the answer,
the retry), and calls whose component asks the client (one round, two rounds); as raw stateless JSON-RPC, a plain echo call and a shell call that creates a task
(then cancelled, untimed). Prints p50 and p99 of sequential calls; figures only, nothing is
asserted.

Usage: target/mcp-venv/bin/python tests/mcp/bench_2026.py [CALLS]
"""

import pathlib
import statistics
import sys
import tempfile
import time

import anyio
import httpx2
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

from conftest import COMPONENTS, CONFORMANCE, REPO, HttpServer
from test_tasks import CAPS, rpc


async def approve(context, params):
    return types.ElicitResult(action="accept", content={"approve": True})


async def series(server, tool, calls):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {server.token}"}, timeout=30)
    transport = streamable_http_client(server.url, http_client=http)
    async with Client(transport, mode="auto", elicitation_callback=approve) as c:
        for _ in range(max(calls // 10, 5)):
            await c.call_tool(tool, {})
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            result = await c.call_tool(tool, {})
            times.append(time.perf_counter() - started)
            assert not result.is_error, result
    times.sort()
    return times


def row(name, times):
    p50 = statistics.median(times) * 1e3
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))] * 1e3
    print(f"{name:<44} p50 {p50:7.2f} ms   p99 {p99:7.2f} ms   ({len(times)} calls)")


def timed(calls, call):
    for _ in range(max(calls // 10, 5)):
        call()
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    times.sort()
    return times


def task_series(calls):
    data = pathlib.Path(tempfile.mkdtemp())
    (data / "workspace").mkdir()
    policy = data / "policy.toml"
    text = (REPO / "policies" / "default.toml").read_text()
    policy.write_text(text.replace("timeout_ms = 30000", "timeout_ms = 120000"))
    server = HttpServer(
        [
            "--rate-limit", "100000", "--policy", str(policy), "--workspace", str(data / "workspace"),
            "--components", str(COMPONENTS / "shell.wasm"), "--components", str(COMPONENTS / "echo.wasm"),
        ],
        data,
    )
    http = httpx2.Client()
    try:
        def plain():
            reply = rpc(server, "tools/call", {"name": "echo", "arguments": {"message": "x"}},
                        name="echo", capabilities=CAPS, http=http)
            assert "result" in reply, reply

        created = []

        def task():
            reply = rpc(server, "tools/call", {"name": "shell", "arguments": {"command": "true"}},
                        name="shell", capabilities=CAPS, http=http)
            assert reply["result"]["resultType"] == "task", reply
            created.append(reply["result"]["taskId"])

        def cancel_all():
            for task_id in created:
                rpc(server, "tasks/cancel", {"taskId": task_id}, name=task_id, capabilities=CAPS,
                    http=http)
            created.clear()

        row("plain call, raw HTTP (echo)", timed(calls, plain))
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            task()
            times.append(time.perf_counter() - started)
            cancel_all()
        times.sort()
        row("task creation, raw HTTP (shell -> task)", times)
    finally:
        http.close()
        server.stop()


async def main(calls):
    server = HttpServer(["--rate-limit", "100000", "--components", str(CONFORMANCE)], tempfile.mkdtemp())
    try:
        row("plain call (test_simple_text)", await series(server, "test_simple_text", calls))
        row("approval via input-required (test_approval)", await series(server, "test_approval", calls))
        row("component question via input-required", await series(
            server, "test_input_required_result_elicitation", calls))
        row("two rounds of component questions", await series(
            server, "test_input_required_result_multi_round", calls))
    finally:
        server.stop()
    await anyio.to_thread.run_sync(task_series, calls)


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 200)
