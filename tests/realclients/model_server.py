"""A scripted model server on 127.0.0.1 that answers as each agent client's API does.

The real clients (Claude Code, Codex CLI, Gemini CLI, Aider) are pointed at it through
their base-URL settings. A test queues the model's messages (`Say`, `Shell`, `Write`,
`Task`); every request the client makes for its agent loop takes the next one, whatever
the dialect:

- Anthropic Messages (`POST /v1/messages`, SSE when `stream` is set): Claude Code.
- OpenAI Responses (`POST /v1/responses`, SSE): Codex CLI.
- Gemini (`POST /v1beta/models/M:streamGenerateContent?alt=sse`, `:generateContent`):
  Gemini CLI.
- OpenAI chat completions (`POST /v1/chat/completions`, SSE chunks): Aider (whole-file
  edit blocks in the text), Qwen Code (tool calls, when the request offers tools).

Requests that are not the agent loop (titles, command-prefix checks, next-speaker checks,
commit-message drafts: the requests that offer no tools, or Aider's commit-message
prompt) get a short fixed answer and do not consume the script. Every request is logged
(`requests`), so a test can say what the client sent.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Say:
    """The model says TEXT."""

    text: str


@dataclass
class Shell:
    """The model runs COMMAND in the client's shell tool."""

    command: str


@dataclass
class Write:
    """The model writes CONTENT to PATH with the client's file tool (Aider: a whole-file
    edit block)."""

    path: str
    content: str


@dataclass
class Task:
    """Claude Code: the model hands PROMPT to a sub-agent (the `Task`/`Agent` tool)."""

    prompt: str


@dataclass
class Read:
    """The model reads the file at PATH with the client's read tool."""

    path: str


@dataclass
class Edit:
    """The model replaces OLD by NEW in the file at PATH with the client's edit tool."""

    path: str
    old: str
    new: str


Part = Say | Shell | Write | Task | Read | Edit


@dataclass
class Logged:
    path: str
    body: dict
    scripted: bool
    answer: list = field(default_factory=list)


class ModelServer:
    """Serves the queued messages; `url` is its base. Use as a context manager."""

    def __init__(self) -> None:
        self.queue: list[list[Part]] = []
        self.requests: list[Logged] = []
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        self.delay = 0.0  # seconds between streamed events (a slow network)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # model lists and the like: nothing to offer
                self._json({"data": [], "models": [], "object": "list"})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if self.headers.get("Content-Encoding") == "zstd":
                    raw = b"{}"  # not expected of the clients pinned here
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                server.answer(self, self.path, body if isinstance(body, dict) else {})

            def _json(self, value: object, status: int = 200) -> None:
                data = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def sse(self, events: list[tuple[str | None, object]]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for name, data in events:
                    chunk = "" if name is None else f"event: {name}\n"
                    payload = data if isinstance(data, str) else json.dumps(data)
                    chunk += f"data: {payload}\n\n"
                    self.wfile.write(chunk.encode())
                    self.wfile.flush()
                    if server.delay:
                        time.sleep(server.delay)
                self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> ModelServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- the script ---------------------------------------------------------------

    def script(self, *messages: list[Part]) -> None:
        """Queue MESSAGES: each is what the model answers to one agent-loop request."""
        with self.lock:
            self.queue.extend(list(message) for message in messages)

    def left(self) -> int:
        with self.lock:
            return len(self.queue)

    def _next(self, path: str, body: dict, scripted: bool) -> list[Part]:
        with self.lock:
            parts = self.queue.pop(0) if scripted and self.queue else []
            if scripted and not parts:
                parts = [Say("Nothing more to do.")]
            self.requests.append(Logged(path, body, scripted, parts))
            return parts

    # -- dialects -----------------------------------------------------------------

    def answer(self, handler, path: str, body: dict) -> None:
        route = path.split("?", 1)[0]
        if route.endswith("/messages/count_tokens"):
            self.requests.append(Logged(path, body, False))
            return handler._json({"input_tokens": 100})
        if route.endswith("/messages"):
            return self._anthropic(handler, path, body)
        if route.endswith("/responses"):
            return self._responses(handler, path, body)
        if route.endswith("/chat/completions"):
            return self._chat(handler, path, body)
        if ":countTokens" in route:
            self.requests.append(Logged(path, body, False))
            return handler._json({"totalTokens": 100})
        if ":streamGenerateContent" in route or ":generateContent" in route:
            return self._gemini(handler, path, body)
        self.requests.append(Logged(path, body, False))
        return handler._json({})

    def _anthropic(self, handler, path: str, body: dict) -> None:
        scripted = bool(body.get("tools"))
        parts = self._next(path, body, scripted) or [Say(_side_answer(body))]
        tool_names = {tool.get("name") for tool in body.get("tools") or []}
        blocks = []
        for part in parts:
            if isinstance(part, Say):
                blocks.append({"type": "text", "text": part.text})
            else:
                name, arguments = _anthropic_tool(part, tool_names)
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": f"toolu_{next(self.ids):04d}",
                        "name": name,
                        "input": arguments,
                    }
                )
        stop = "tool_use" if any(block["type"] == "tool_use" for block in blocks) else "end_turn"
        message_id = f"msg_{next(self.ids):04d}"
        model = body.get("model", "claude-test")
        usage = {"input_tokens": 10, "output_tokens": 10}
        if not body.get("stream"):
            return handler._json(
                {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": blocks,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": usage,
                }
            )
        events: list[tuple[str | None, object]] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": message_id,
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": usage,
                    },
                },
            ),
        ]
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                start = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": block["text"]}
            else:
                start = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            events += [
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": start},
                ),
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": index}),
            ]
        events += [
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 10},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        handler.sse(events)

    def _responses(self, handler, path: str, body: dict) -> None:
        scripted = bool(body.get("tools"))
        parts = self._next(path, body, scripted) or [Say(_side_answer(body))]
        tools = {tool.get("name") or tool.get("type"): tool for tool in body.get("tools") or []}
        items = []
        for part in parts:
            number = next(self.ids)
            if isinstance(part, Say):
                items.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "id": f"msg_{number}",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": part.text, "annotations": []}],
                    }
                )
            else:
                items.append(_codex_call(part, tools, number))
        response_id = f"resp_{next(self.ids)}"
        base = {
            "id": response_id,
            "object": "response",
            "model": body.get("model", "gpt-test"),
            "status": "in_progress",
            "output": [],
        }
        events: list[tuple[str | None, object]] = [
            ("response.created", {"type": "response.created", "response": base})
        ]
        for index, item in enumerate(items):
            events.append(
                (
                    "response.output_item.added",
                    {
                        "type": "response.output_item.added",
                        "output_index": index,
                        "item": {**item, "status": "in_progress"},
                    },
                )
            )
            if item["type"] == "message":
                events.append(
                    (
                        "response.output_text.delta",
                        {
                            "type": "response.output_text.delta",
                            "output_index": index,
                            "item_id": item["id"],
                            "content_index": 0,
                            "delta": item["content"][0]["text"],
                        },
                    )
                )
            events.append(
                (
                    "response.output_item.done",
                    {"type": "response.output_item.done", "output_index": index, "item": item},
                )
            )
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 10,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 20,
        }
        events.append(
            (
                "response.completed",
                {
                    "type": "response.completed",
                    "response": {**base, "status": "completed", "output": items, "usage": usage},
                },
            )
        )
        handler.sse(events)

    def _gemini(self, handler, path: str, body: dict) -> None:
        declared = [
            declaration.get("name")
            for tool in body.get("tools") or []
            for declaration in tool.get("functionDeclarations") or []
        ]
        scripted = bool(declared)
        parts = self._next(path, body, scripted)
        config = body.get("generationConfig") or {}
        if not parts:
            if "json" in str(config.get("responseMimeType", "")):
                text = json.dumps(
                    {
                        "reasoning": "The model has finished its turn.",
                        "next_speaker": "user",
                        "model_choice": "flash",
                    }
                )
            else:
                text = _side_answer(body)
            parts = [Say(text)]
        out = []
        for part in parts:
            if isinstance(part, Say):
                out.append({"text": part.text})
            else:
                name, arguments = _gemini_tool(part, set(declared))
                out.append({"functionCall": {"name": name, "args": arguments}})
        chunk = {
            "candidates": [
                {"content": {"role": "model", "parts": out}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": 10,
                "candidatesTokenCount": 10,
                "totalTokenCount": 20,
            },
            "modelVersion": "gemini-test",
        }
        if ":streamGenerateContent" in path:
            return handler.sse([(None, chunk)])
        return handler._json(chunk)

    def _chat(self, handler, path: str, body: dict) -> None:
        messages = body.get("messages") or []
        tools = {(tool.get("function") or {}).get("name") for tool in body.get("tools") or []} - {
            None
        }
        if tools:
            # Qwen Code: its agent loop offers the shell tool; side requests (titles,
            # summaries) offer none or few. Everything else is a side answer.
            scripted = "run_shell_command" in tools
        else:
            system = " ".join(
                str(message.get("content"))
                for message in messages
                if message.get("role") == "system"
            )
            scripted = "commit message" not in system.lower()
        parts = self._next(path, body, scripted)
        calls = []
        if tools:
            texts = [part.text for part in parts if isinstance(part, Say)]
            text = "\n\n".join(texts) if parts else _side_answer(body)
            for part in parts:
                if not isinstance(part, Say):
                    name, arguments = _qwen_tool(part)
                    calls.append((f"call_{next(self.ids):04d}", name, json.dumps(arguments)))
        elif parts:
            text = "\n\n".join(_aider_text(part) for part in parts)
        else:
            text = "Change the code as asked"
        model = body.get("model", "gpt-test")
        finish = "tool_calls" if calls else "stop"
        tool_calls = [
            {
                "index": index,
                "id": ident,
                "type": "function",
                "function": {"name": name, "arguments": args},
            }
            for index, (ident, name, args) in enumerate(calls)
        ]
        if not body.get("stream"):
            message: dict = {"role": "assistant", "content": text or None}
            if tool_calls:
                message["tool_calls"] = [
                    {key: value for key, value in call.items() if key != "index"}
                    for call in tool_calls
                ]
            return handler._json(
                {
                    "id": f"chatcmpl-{next(self.ids)}",
                    "object": "chat.completion",
                    "created": 0,
                    "model": model,
                    "choices": [{"index": 0, "finish_reason": finish, "message": message}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
                }
            )
        ident = f"chatcmpl-{next(self.ids)}"

        def chunk(delta: dict, finish: str | None = None) -> dict:
            return {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        events: list[tuple[str | None, object]] = [
            (None, chunk({"role": "assistant", "content": text}))
        ]
        if tool_calls:
            events.append((None, chunk({"tool_calls": tool_calls})))
        usage = {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
        events += [(None, {**chunk({}, finish), "usage": usage}), (None, "[DONE]")]
        handler.sse(events)


def _side_answer(body: dict) -> str:
    """What a request outside the agent loop gets: short, and plain."""
    return "Scripted session"


def _anthropic_tool(part: Part, names: set) -> tuple[str, dict]:
    """Claude Code's tools, or GitHub Copilot CLI's (`bash`, `create`, `view`, `edit`)
    when offered."""
    if isinstance(part, Read) and "view" in names:
        return "view", {"path": part.path}
    if isinstance(part, Read):
        return "Read", {"file_path": part.path}
    if isinstance(part, Edit) and "edit" in names:
        return "edit", {"path": part.path, "old_str": part.old, "new_str": part.new}
    if isinstance(part, Edit):
        return "Edit", {"file_path": part.path, "old_string": part.old, "new_string": part.new}
    if isinstance(part, Shell):
        name = "bash" if "bash" in names else "Bash"
        return name, {"command": part.command, "description": "Run a command"}
    if isinstance(part, Write) and "create" in names:
        return "create", {"path": part.path, "file_text": part.content}
    if isinstance(part, Write):
        return "Write", {"file_path": part.path, "content": part.content}
    if isinstance(part, Task):
        name = "Agent" if "Agent" in names else "Task"
        return name, {
            "description": "Sub-agent task",
            "prompt": part.prompt,
            "subagent_type": "general-purpose",
        }
    raise TypeError(part)


def _codex_call(part: Part, tools: dict, number: int) -> dict:
    call = {"id": f"fc_{number}", "call_id": f"call_{number}", "status": "completed"}
    if isinstance(part, Write):
        # Codex edits with apply_patch; a shell heredoc is what a model without it does.
        command = f"cat > {part.path} <<'EOF'\n{part.content}EOF"
    elif isinstance(part, Shell):
        command = part.command
    else:
        raise TypeError(part)
    if "exec_command" in tools:
        arguments = {"cmd": command}
        name = "exec_command"
    else:
        arguments = {"command": ["bash", "-lc", command]}
        name = "shell"
    return {**call, "type": "function_call", "name": name, "arguments": json.dumps(arguments)}


def _gemini_tool(part: Part, names: set) -> tuple[str, dict]:
    if isinstance(part, Read):
        return "read_file", {"file_path": part.path}
    if isinstance(part, Edit):
        return "replace", {
            "file_path": part.path,
            "old_string": part.old,
            "new_string": part.new,
            "instruction": "Change the value.",
        }
    if isinstance(part, Shell):
        return "run_shell_command", {"command": part.command, "description": "Run a command"}
    if isinstance(part, Write):
        return "write_file", {"file_path": part.path, "content": part.content}
    raise TypeError(part)


def _qwen_tool(part: Part) -> tuple[str, dict]:
    if isinstance(part, Read):
        return "read_file", {"file_path": part.path}
    if isinstance(part, Edit):
        return "edit", {"file_path": part.path, "old_string": part.old, "new_string": part.new}
    if isinstance(part, Shell):
        return "run_shell_command", {"command": part.command, "description": "Run a command"}
    if isinstance(part, Write):
        return "write_file", {"file_path": part.path, "content": part.content}
    if isinstance(part, Task):
        return "agent", {
            "description": "Sub-agent task",
            "prompt": part.prompt,
            "subagent_type": "general-purpose",
            "run_in_background": False,  # a top-level agent runs in the background otherwise
        }
    raise TypeError(part)


def _aider_text(part: Part) -> str:
    if isinstance(part, Say):
        return part.text
    if isinstance(part, Write):
        return f"{part.path}\n```\n{part.content}```"
    raise TypeError(part)
