"""Tasks (`io.modelcontextprotocol/tasks`) over stateless 2026-07-28 HTTP, spoken as raw JSON-RPC
(the Python SDK has no tasks client): a long shell command runs as a task, asks its approval
through the task, reports progress while it runs, and is cancelled with its processes gone; a
task answers only the client that started it; one client's running tasks, and the server's, are
bounded; a session over stdio is told each status change."""

import json
import os
import pathlib
import queue
import shutil
import subprocess
import tempfile
import threading
import time

import httpx2
import pytest

from conftest import CACHE, CHITIN, COMPONENTS, REPO, HttpServer, Relayed, as_another_user

VERSION = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
# The shell command: records its shell's and its child's pids, then sleeps 60 s (the issue's
# figure; the test cancels it long before).
COMMAND = "echo $$ > sh.pid; sleep 60 & echo $! > sleep.pid; wait"


@pytest.fixture(scope="module")
def long_server():
    """A server whose policy lets calls run 120 s, so the shell (which asks for up to 300 s) is
    allowed longer than a synchronous call and runs as a task."""
    data = tempfile.mkdtemp(prefix="chitin-mcp-tasks-")
    workspace = pathlib.Path(data) / "workspace"
    workspace.mkdir()
    policy = pathlib.Path(data) / "policy.toml"
    text = (REPO / "policies" / "default.toml").read_text()
    policy.write_text(text.replace("timeout_ms = 30000", "timeout_ms = 120000"))
    server = HttpServer(
        [
            "--policy", str(policy),
            "--workspace", str(workspace),
            "--components", str(COMPONENTS / "shell.wasm"),
            "--components", str(COMPONENTS / "echo.wasm"),
        ],
        data,
    )
    server.workspace = workspace
    yield server
    server.stop()
    shutil.rmtree(data, ignore_errors=True)


def rpc(server, method, params, *, name=None, capabilities=None, http=None):
    """One stateless 2026-07-28 request (on `http`, an httpx2.Client, when given); the JSON-RPC
    response."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "chitin-tasks-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
    }
    headers = {
        "Authorization": f"Bearer {server.token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": method,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    response = (http or httpx2).post(server.url, json=body, headers=headers, timeout=30)
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:"):
                message = json.loads(line[5:])
                if message.get("id") == 1:
                    return message
        raise AssertionError(f"no response in the stream: {response.text}")
    return response.json()


CAPS = {"elicitation": {"form": {}}, "extensions": {TASKS: {}}}


def get(server, task_id, http=None):
    reply = rpc(
        server, "tasks/get", {"taskId": task_id}, name=task_id, capabilities=CAPS, http=http
    )
    assert "result" in reply, reply
    return reply["result"]


def wait_for(server, task_id, done, timeout=30, http=None):
    deadline = time.monotonic() + timeout
    while True:
        task = get(server, task_id, http)
        if done(task):
            return task
        assert time.monotonic() < deadline, f"task never got there: {task}"
        time.sleep(0.2)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has exited; it only waits for its parent to reap it.
    stat = pathlib.Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


def test_a_long_shell_task_asks_reports_progress_and_dies_when_cancelled(long_server):
    server = long_server
    started = rpc(
        server, "tools/call", {"name": "shell", "arguments": {"command": COMMAND, "timeout": 90}},
        name="shell", capabilities=CAPS,
    )
    result = started.get("result", {})
    assert result.get("resultType") == "task", started
    task_id = result["task"]["taskId"] if "task" in result else result["taskId"]

    # The shell asks a person first: the task waits with the question.
    asking = wait_for(server, task_id, lambda t: t["status"] == "input_required")
    (key, question), = asking["inputRequests"].items()
    assert question["method"] == "elicitation/create"
    assert "`shell`" in question["params"]["message"]
    answer = {key: {"action": "accept", "content": {"approve": True}}}
    update = rpc(
        server, "tasks/update", {"taskId": task_id, "inputResponses": answer},
        name=task_id, capabilities=CAPS,
    )
    assert "result" in update, update

    # Running: both pids are written, and the host reports the process as progress.
    pids = [server.workspace / "sh.pid", server.workspace / "sleep.pid"]
    deadline = time.monotonic() + 30
    while not all(p.exists() and p.read_text().strip() for p in pids):
        assert time.monotonic() < deadline, get(server, task_id)
        time.sleep(0.1)
    running = wait_for(server, task_id, lambda t: "running for" in (t.get("statusMessage") or ""))
    assert running["status"] == "working", running
    processes = [int(p.read_text()) for p in pids]
    assert all(alive(pid) for pid in processes)

    cancel = rpc(server, "tasks/cancel", {"taskId": task_id}, name=task_id, capabilities=CAPS)
    assert "result" in cancel, cancel
    wait_for(server, task_id, lambda t: t["status"] == "cancelled", timeout=10)
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in processes):
        assert time.monotonic() < deadline, f"still running after the cancel: {processes}"
        time.sleep(0.1)


def test_a_tool_without_a_long_time_limit_is_a_plain_call(long_server):
    reply = rpc(
        long_server, "tools/call", {"name": "echo", "arguments": {"message": "sync"}},
        name="echo", capabilities=CAPS,
    )
    assert reply["result"].get("resultType", "complete") == "complete", reply
    assert reply["result"]["structuredContent"] == {"message": "sync"}


def start_shell_task(server, command="sleep 60", http=None):
    reply = rpc(
        server, "tools/call", {"name": "shell", "arguments": {"command": command, "timeout": 90}},
        name="shell", capabilities=CAPS, http=http,
    )
    return reply


def client_through(port):
    """An HTTP client whose requests go through the relay at `port` (`as_another_user`): to the
    server, another client than this test's own."""
    return httpx2.Client(transport=Relayed(port))


def cancel(server, task_id, http=None):
    reply = rpc(
        server, "tasks/cancel", {"taskId": task_id}, name=task_id, capabilities=CAPS, http=http
    )
    assert "result" in reply, reply
    wait_for(server, task_id, lambda t: t["status"] == "cancelled", timeout=10, http=http)


def task_id_of(reply):
    result = reply["result"]
    return result["task"]["taskId"] if "task" in result else result["taskId"]


def test_one_client_may_run_only_so_many_tasks_at_once(long_server):
    server = long_server
    started = []
    try:
        # Each shell task waits for its approval, so all four stay running.
        for _ in range(4):
            reply = start_shell_task(server)
            assert reply.get("result", {}).get("resultType") == "task", reply
            started.append(task_id_of(reply))
        refused = start_shell_task(server)
        assert "error" in refused, refused
        assert "already has 4 tasks running" in refused["error"]["message"], refused
    finally:
        for task_id in started:
            rpc(server, "tasks/cancel", {"taskId": task_id}, name=task_id, capabilities=CAPS)
    for task_id in started:
        wait_for(server, task_id, lambda t: t["status"] == "cancelled", timeout=10)
    # A cancelled task frees its client's slot.
    reply = start_shell_task(server)
    assert reply.get("result", {}).get("resultType") == "task", reply
    task_id = task_id_of(reply)
    rpc(server, "tasks/cancel", {"taskId": task_id}, name=task_id, capabilities=CAPS)
    wait_for(server, task_id, lambda t: t["status"] == "cancelled", timeout=10)


def test_a_task_answers_only_the_client_that_started_it(long_server):
    server = long_server
    with as_another_user(server) as port, client_through(port) as owner:
        reply = start_shell_task(server, http=owner)
        assert reply.get("result", {}).get("resultType") == "task", reply
        task_id = task_id_of(reply)
        asking = wait_for(server, task_id, lambda t: t["status"] == "input_required", http=owner)
        (key, _), = asking["inputRequests"].items()
        approve = {key: {"action": "accept", "content": {"approve": True}}}
        try:
            # Another client that learnt the id can neither read the task, nor approve its
            # command, nor cancel it: each is told there is no such task.
            for method, params in [
                ("tasks/get", {"taskId": task_id}),
                ("tasks/update", {"taskId": task_id, "inputResponses": approve}),
                ("tasks/cancel", {"taskId": task_id}),
            ]:
                refused = rpc(server, method, params, name=task_id, capabilities=CAPS)
                assert "error" in refused, (method, refused)
                assert refused["error"]["code"] == -32602, (method, refused)
                assert "unknown task" in refused["error"]["message"], (method, refused)
            # The task still waits for its own client's answer.
            still = get(server, task_id, owner)
            assert still["status"] == "input_required", still
            assert key in still["inputRequests"], still
        finally:
            cancel(server, task_id, owner)


def test_the_server_runs_only_so_many_tasks_at_once(long_server):
    server = long_server
    started = []
    with as_another_user(server) as port, client_through(port) as other:
        try:
            # Two clients, four tasks each (the most one client may): the server's eight.
            for http in (None, other):
                for _ in range(4):
                    reply = start_shell_task(server, http=http)
                    assert reply.get("result", {}).get("resultType") == "task", reply
                    started.append((task_id_of(reply), http))
            # A third client, with none of its own running, waits for one of them.
            with as_another_user(server, uid=65533) as third, client_through(third) as http:
                refused = start_shell_task(server, http=http)
            assert "error" in refused, refused
            assert "8 tasks are already running in this server" in refused["error"]["message"]
        finally:
            for task_id, http in started:
                cancel(server, task_id, http)
    reply = start_shell_task(server)
    assert reply.get("result", {}).get("resultType") == "task", reply
    cancel(server, task_id_of(reply))


class StdioSession:
    """`chitin serve` on stdio, spoken as JSON lines; messages are read on a thread."""

    def __init__(self, args, data):
        workspace = pathlib.Path(data) / "workspace"
        workspace.mkdir(exist_ok=True)
        env = {
            "CHITIN_DATA_DIR": str(data),
            "CHITIN_WORKSPACE": str(workspace),
            "CHITIN_TRUSTED_KEYS": str(REPO / "build" / "trusted_keys"),
            "CHITIN_CACHE_DIR": CACHE,
            "PATH": os.environ.get("PATH", ""),
        }
        self.process = subprocess.Popen(
            [str(CHITIN), "serve", "--no-watch", *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
        )
        self.messages = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self.messages.put(json.loads(line))

    def send(self, message):
        self.process.stdin.write((json.dumps(message) + "\n").encode())
        self.process.stdin.flush()

    def wait(self, matches, timeout=60):
        """The first message from now on that `matches`; others are dropped."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, "no matching message in time"
            message = self.messages.get(timeout=remaining)
            if matches(message):
                return message

    def stop(self):
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def test_a_session_is_told_each_status_change_of_its_task():
    """Over stdio (a lasting channel) the server sends `notifications/tasks` as the task asks
    its question, runs again once answered, and ends cancelled."""
    data = tempfile.mkdtemp(prefix="chitin-mcp-task-status-")
    policy = pathlib.Path(data) / "policy.toml"
    text = (REPO / "policies" / "default.toml").read_text()
    policy.write_text(text.replace("timeout_ms = 30000", "timeout_ms = 120000"))
    session = StdioSession(
        ["--policy", str(policy), "--components", str(COMPONENTS / "shell.wasm")], data
    )
    try:
        session.send({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": CAPS,
                "clientInfo": {"name": "chitin-task-status-test", "version": "1"},
            },
        })
        session.wait(lambda m: m.get("id") == 1)
        session.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        session.send({
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "shell", "arguments": {"command": "sleep 60", "timeout": 90}},
        })
        started = session.wait(lambda m: m.get("id") == 2)
        task_id = task_id_of(started)

        def status(wanted):
            return lambda m: (
                m.get("method") == "notifications/tasks"
                and m["params"]["taskId"] == task_id
                and m["params"]["status"] == wanted
            )

        asking = session.wait(status("input_required"))
        (key, question), = asking["params"]["inputRequests"].items()
        assert question["method"] == "elicitation/create"
        session.send({
            "jsonrpc": "2.0", "id": 3, "method": "tasks/update",
            "params": {"taskId": task_id, "inputResponses": {
                key: {"action": "accept", "content": {"approve": True}},
            }},
        })
        session.wait(status("working"))
        session.send({"jsonrpc": "2.0", "id": 4, "method": "tasks/cancel", "params": {"taskId": task_id}})
        session.wait(status("cancelled"), timeout=15)
    finally:
        session.stop()
        shutil.rmtree(data, ignore_errors=True)
