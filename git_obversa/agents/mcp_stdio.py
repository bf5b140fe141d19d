"""MCP over stdin/stdout, answering every line that is no JSON-RPC message.

The SDK's stdio transport drops a line it cannot read as a JSON-RPC message, so a client
that sent a request with an id (`"method": 5`, `"jsonrpc": "1.0"`) would wait for ever.
Here such a line gets the JSON-RPC error it calls for (-32700 for no JSON, -32600 for
an invalid request, naming what is wrong), with the request's id when it has one; the
lines that are messages go to the SDK's own transport unchanged.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import anyio
from mcp.server.stdio import stdio_server
from mcp_types import INVALID_REQUEST, PARSE_ERROR, jsonrpc_message_adapter


def rejection(line: str) -> str | None:
    """The JSON-RPC error reply to LINE when it is not a JSON-RPC message, else None."""
    try:
        jsonrpc_message_adapter.validate_json(line, by_name=False)
        return None
    except ValueError:
        pass
    try:
        message = json.loads(line)
    except ValueError:
        return _error(None, PARSE_ERROR, "Parse error: the line is not JSON.")
    if not isinstance(message, dict):
        return _error(None, INVALID_REQUEST, "Invalid request: a message is one JSON object.")
    given = message.get("id")
    has_id = isinstance(given, (str, int)) and not isinstance(given, bool)
    reply_id = given if has_id else None
    if message.get("jsonrpc") != "2.0":
        reason = 'jsonrpc must be "2.0"'
    elif "method" in message and not isinstance(message["method"], str):
        reason = "method must be a string"
    elif "method" not in message and "result" not in message and "error" not in message:
        reason = "method is missing"
    elif "params" in message and not isinstance(message["params"], dict):
        reason = "params must be an object"
    elif "id" in message and not has_id:
        reason = "id must be a string or an integer"
    else:
        reason = "not a JSON-RPC 2.0 request, notification or response"
    return _error(reply_id, INVALID_REQUEST, f"Invalid request: {reason}.")


def _error(message_id: str | int | None, code: int, text: str) -> str:
    reply = {"jsonrpc": "2.0", "id": message_id, "error": {"code": code, "message": text}}
    return json.dumps(reply, separators=(",", ":"))


class _Output:
    """The wire out: whole lines, one writer at a time (the SDK's and the rejections)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.lock = anyio.Lock()

    async def write(self, text: str) -> None:
        async with self.lock:
            await self.stream.write(text)

    async def flush(self) -> None:
        await self.stream.flush()


class _Input:
    """The wire in, less the lines that are answered here."""

    def __init__(self, stream: Any, output: _Output) -> None:
        self.stream = stream
        self.output = output

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self.stream:
            if not line.strip():
                continue
            reply = rejection(line)
            if reply is None:
                yield line
                continue
            await self.output.write(reply + "\n")
            await self.output.flush()


def _take_standard_streams() -> tuple[int, int]:
    """Private copies of fd 0 and 1 for the wire; fd 0 then reads nothing and fd 1 goes to
    stderr, so a child process's stray output cannot corrupt the protocol."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    return wire_in, wire_out


def serve(run: Callable[[Any, Any], Coroutine[Any, Any, None]]) -> None:
    """Run RUN(read_stream, write_stream) (a server's session) on stdin and stdout."""
    wire_in, wire_out = _take_standard_streams()
    sys.stdout = sys.stderr

    async def main() -> None:
        raw_in = anyio.wrap_file(open(wire_in, encoding="utf-8", errors="replace"))  # noqa: SIM115
        raw_out = anyio.wrap_file(open(wire_out, "w", encoding="utf-8"))  # noqa: SIM115
        output = _Output(raw_out)
        async with stdio_server(stdin=_Input(raw_in, output), stdout=output) as streams:
            await run(*streams)

    anyio.run(main)
