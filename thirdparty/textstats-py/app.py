"""acme/textstats: a third-party chitin tool written in Python.

It targets chitin's `tool-component` world (wit/worlds.wit) and exports the `tool` interface:
`specs()` lists the tools this component carries, and `call(name, args_json)` runs one with its
arguments as JSON text and returns its result as JSON text. componentize-py maps WIT names to
snake_case, records to dataclasses, and a `result<string, tool-error>` to "return the ok string,
or raise `Err(tool-error)`".

Built by plain `componentize-py componentize` (see `just build-thirdparty`): the component
imports the whole standard `wasi:cli` world, sockets and file access included. Its manifest asks
for no capability, so chitin links those imports with every use refused; `sandbox_probe` shows
what that means from inside.
"""

import json
import socket
import statistics

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import types

STATS_INPUT = {
    "type": "object",
    "properties": {
        "numbers": {
            "type": "array",
            "items": {"type": "number"},
            "minItems": 1,
            "description": "The numbers to summarise",
        }
    },
    "required": ["numbers"],
    "additionalProperties": False,
}

STATS_OUTPUT = {
    "type": "object",
    "properties": {
        "count": {"type": "integer", "minimum": 1},
        "mean": {"type": "number"},
        "median": {"type": "number"},
        "stdev": {"type": "number", "description": "Sample standard deviation; 0 for one number"},
        "min": {"type": "number"},
        "max": {"type": "number"},
    },
    "required": ["count", "mean", "median", "stdev", "min", "max"],
    "additionalProperties": False,
}

PROBE_INPUT = {"type": "object", "properties": {}, "additionalProperties": False}

PROBE_OUTPUT = {
    "type": "object",
    "properties": {
        key: {"type": "string", "description": f"What {what} got: `ok` or the error"}
        for key, what in [
            ("connect", "a TCP connection to 127.0.0.1:80"),
            ("lookup", "resolving example.com"),
            ("open_passwd", "opening /etc/passwd"),
        ]
    },
    "required": ["connect", "lookup", "open_passwd"],
    "additionalProperties": False,
}

READ_ONLY = types.Annotations(read_only=True, destructive=False, idempotent=True, open_world=False)


def invalid(message: str) -> Err:
    return Err(types.ToolError_InvalidArgs(message))


def describe(args: dict) -> dict:
    if set(args) != {"numbers"}:
        extra = sorted(set(args) - {"numbers"})
        raise invalid(f"unknown field `{extra[0]}`" if extra else "missing field `numbers`")
    numbers = args["numbers"]
    if not isinstance(numbers, list) or not numbers:
        raise invalid("numbers: expected a non-empty array")
    for i, n in enumerate(numbers):
        # bool is an int subclass in Python, but not a number in JSON.
        if isinstance(n, bool) or not isinstance(n, (int, float)):
            raise invalid(f"numbers[{i}]: expected a number")
    return {
        "count": len(numbers),
        "mean": statistics.fmean(numbers),
        "median": statistics.median(numbers),
        "stdev": statistics.stdev(numbers) if len(numbers) > 1 else 0.0,
        "min": min(numbers),
        "max": max(numbers),
    }


def attempt(action) -> str:
    try:
        action()
        return "ok"
    except Exception as e:  # every refusal is reported, none is fatal
        return f"error: {type(e).__name__}: {e}"


def open_socket():
    # An address, not a name: the attempt must reach the socket layer, not the resolver.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(2)
        s.connect(("127.0.0.1", 80))


def read_passwd():
    with open("/etc/passwd") as f:
        f.read()


def sandbox_probe(args: dict) -> dict:
    if args:
        raise invalid(f"unknown field `{sorted(args)[0]}`")
    return {
        "connect": attempt(open_socket),
        # Bytes, so the name goes to the resolver as is (the idna codec is not bundled).
        "lookup": attempt(lambda: socket.getaddrinfo(b"example.com", 443)),
        "open_passwd": attempt(read_passwd),
    }


TOOLS = {
    "describe_numbers": (
        "Summarises a list of numbers: count, mean, median, sample standard deviation, min, max.",
        STATS_INPUT,
        STATS_OUTPUT,
        describe,
    ),
    "sandbox_probe": (
        "Tries to open a TCP connection, resolve a name and read /etc/passwd, and reports what "
        "the sandbox answered (with no grant, each is refused).",
        PROBE_INPUT,
        PROBE_OUTPUT,
        sandbox_probe,
    ),
}


class Tool(exports.Tool):
    def specs(self) -> list[types.ToolSpec]:
        return [
            types.ToolSpec(
                name=name,
                description=description,
                input_schema=json.dumps(input_schema),
                output_schema=json.dumps(output_schema),
                annotations=READ_ONLY,
            )
            for name, (description, input_schema, output_schema, _) in TOOLS.items()
        ]

    def call(self, name: str, args_json: str) -> str:
        tool = TOOLS.get(name)
        if tool is None:
            raise Err(types.ToolError_NotFound(f"no tool `{name}`; this component carries: {', '.join(TOOLS)}"))
        try:
            args = json.loads(args_json)
        except json.JSONDecodeError as e:
            raise invalid(f"arguments are not JSON: {e}")
        if not isinstance(args, dict):
            raise invalid("arguments must be a JSON object")
        return json.dumps(tool[3](args))
