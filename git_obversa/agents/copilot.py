"""Capturing GitHub Copilot CLI's reasoning from its session events.

Copilot CLI (`@github/copilot`, checked with 1.0.102) writes each session to
`$COPILOT_HOME/session-state/<session id>/events.jsonl` (`~/.copilot` by default), one
`{"type", "data", "id", "timestamp", "parentId"}` per line. What we take:

    {"type": "assistant.message", "data": {"messageId", "content", "toolRequests"}}
                                                         -> engine:text (non-empty content)
    {"type": "user.message", ...}                        -> a new response starts

Everything else (`session.*`, `hook.*`, `tool.execution_*`, `assistant.turn_*`, usage
records, the system message) is left. The session writes an assistant message before its
tool calls run, so a commit made by one carries the reasoning before it.

Its hooks (`.github/hooks/*.json`, `{"version": 1, "hooks": {"preToolUse": [{"type":
"command", "bash": …}]}}`) receive camelCase payloads without the event's name:
`{"sessionId", "cwd", "toolName", "toolArgs"}` before and after a tool, `{"sessionId",
"transcriptPath", "stopReason"}` at `agentStop`, each with a `timestamp`. `git obversa
install --copilot` writes one file of its own there; each handler names its event on the
command line.

Before running a hook the session records its start, `{"type": "hook.start", "data":
{"hookType", "input"}}`, whose input is the payload (a tool call's as `{"toolCalls":
[{"name", "args"}]}`, without the timestamp); `hook.end` names the hook type too. The
hook that must read what came before waits for the record of its own start
(`own_hook_start`): any record of the same hook type may be another run's, such as the
previous `agentStop`'s end or the `preToolUse` of a file edit, which reads nothing.

It loads a project's hooks only in a trusted folder (`folder_trusted`): without it the
session runs its tools and no hook of ours, so nothing is captured and nothing says so.

A command hook's stdout `{"additionalContext": text}` reaches the model: at
`sessionStart` as a text before the first prompt, at `preToolUse` as a message after the
tool's result ("Additional context from preToolUse hook: …"). `install --copilot` puts
`agent-context` handlers there too (`context_hooks.hook_groups`); this module is also
what they read the payload with, so it imports nothing heavy until it ingests.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from git_obversa.agents.by_content import Said
    from git_obversa.agents.claude_code import Ingested
    from git_obversa.record.turns import TurnStore

AGENT = "copilot"
HOOK = "git obversa agent-hook copilot"
# The Copilot hooks capture runs at -> the moments `hook_events` knows.
EVENTS = {
    "preToolUse": "PreToolUse",
    "postToolUse": "PostToolUse",
    "agentStop": "Stop",
    "subagentStop": "SubagentStop",
    "sessionEnd": "SessionEnd",
}
MOMENTS = {**EVENTS, "sessionStart": "SessionStart"}  # with the context hooks' own
HOOKS_FILE = ".github/hooks/git-obversa.json"


def hooks_file_content(more: dict[str, list[dict]] | None = None) -> dict:
    """What `install --copilot` writes to `.github/hooks/git-obversa.json`: the capture
    handlers, then MORE (the context handlers, `context_hooks.hook_groups`)."""
    hooks: dict[str, list[dict]] = {
        name: [{"type": "command", "bash": f"{HOOK} {name}", "timeoutSec": 30}] for name in EVENTS
    }
    for name, entries in (more or {}).items():
        hooks.setdefault(name, []).extend(entries)
    return {"version": 1, "hooks": hooks}


def event_fields(payload: dict, name: str) -> dict:
    """A Copilot hook payload in the shape the other agents send (`hook_events`)."""
    session = payload.get("sessionId") if isinstance(payload.get("sessionId"), str) else ""
    transcript = payload.get("transcriptPath")
    if not isinstance(transcript, str) or not transcript:
        events = copilot_home() / "session-state" / session / "events.jsonl"
        transcript = str(events) if session else ""
    return {
        "hook_event_name": MOMENTS.get(name, name),
        "hook_type": name,  # as its events file records the hook's start
        "session_id": session,
        "transcript_path": transcript,
        "cwd": payload.get("cwd"),
        "tool_name": payload.get("toolName"),
        "tool_input": payload.get("toolArgs"),
        "timestamp": payload.get("timestamp"),
    }


def edit_input(tool_args: object) -> dict:
    """The arguments of Copilot's `edit` tool (`{"path", "old_str", "new_str"}`) in the
    shape of Claude Code's Edit, which `lookup.context` reads."""
    if not isinstance(tool_args, dict):
        return {}
    return {
        "file_path": tool_args.get("path"),
        "old_string": tool_args.get("old_str"),
        "new_string": tool_args.get("new_str"),
    }


def copilot_home() -> Path:
    """Where Copilot CLI keeps its state and config: `$COPILOT_HOME`, else `~/.copilot`."""
    home = os.environ.get("COPILOT_HOME")
    return Path(home) if home else Path(os.path.expanduser("~")) / ".copilot"


def folder_trusted(top: str | os.PathLike[str]) -> bool:
    """Whether Copilot CLI trusts the folder TOP, and so loads its `.github/hooks`: a
    folder in `trustedFolders` of `$COPILOT_HOME/config.json` (what answering "Yes, and
    remember this folder for future sessions" writes; older versions' `trusted_folders`
    is still read) trusts itself and what is under it; `COPILOT_ALLOW_ALL=true` trusts
    every folder."""
    if os.environ.get("COPILOT_ALLOW_ALL") == "true":
        return True
    try:
        text = (copilot_home() / "config.json").read_text(encoding="utf-8")
        # The client heads the file with `//` comment lines.
        config = json.loads("".join(line for line in text.splitlines(True) if not _comment(line)))
    except (OSError, ValueError):
        return False
    folders: list = []
    for key in ("trustedFolders", "trusted_folders"):
        listed = config.get(key) if isinstance(config, dict) else None
        folders += listed if isinstance(listed, list) else []
    here = os.path.realpath(top)
    for folder in folders:
        if not isinstance(folder, str) or not folder:
            continue
        root = os.path.realpath(os.path.expanduser(folder))
        if here == root or here.startswith(root.rstrip(os.sep) + os.sep):
            return True
    return False


def _comment(line: str) -> bool:
    return line.lstrip().startswith("//")


def own_hook_start(fields: dict) -> Callable[[bytes], bool] | None:
    """A test of events.jsonl bytes: do they hold the record of the start of the hook
    run FIELDS (`event_fields`) came from? None when the payload does not say which."""
    kind = fields.get("hook_type")
    if not isinstance(kind, str) or not kind:
        return None
    marker = json.dumps({"hookType": kind}, separators=(",", ":"))[1:-1].encode()

    def found(data: bytes) -> bool:
        for raw in data.splitlines():
            if marker not in raw or b'"hook.start"' not in raw:
                continue
            try:
                line = json.loads(raw)
            except ValueError:
                continue  # the last line, half written
            if _is_start_of(line, kind, fields):
                return True
        return False

    return found


def _is_start_of(line: object, kind: str, fields: dict) -> bool:
    if not isinstance(line, dict) or line.get("type") != "hook.start":
        return False
    data = line.get("data")
    if not isinstance(data, dict):
        return False
    hook_input = data.get("input")
    if data.get("hookType") != kind or not isinstance(hook_input, dict):
        return False
    if "timestamp" in hook_input:
        return hook_input["timestamp"] == fields.get("timestamp")
    calls = hook_input.get("toolCalls")
    return isinstance(calls, list) and any(
        isinstance(call, dict)
        and call.get("name") == fields.get("tool_name")
        and call.get("args") == fields.get("tool_input")
        for call in calls
    )


def event_turns(line: object) -> list[Said]:
    """What one events.jsonl line says: an assistant message's text; a PROMPT marker for
    the user's message."""
    from git_obversa.agents.by_content import PROMPT, Said

    if not isinstance(line, dict) or not isinstance(line.get("data"), dict):
        return []
    data = line["data"]
    if line.get("type") == "user.message":
        return [Said(PROMPT, "")]
    if line.get("type") != "assistant.message":
        return []
    text = data.get("content")
    ident = data.get("messageId") if isinstance(data.get("messageId"), str) else None
    return [Said("engine:text", text, ident)] if isinstance(text, str) and text.strip() else []


def ingest_copilot(
    events: str | os.PathLike[str],
    store: TurnStore,
    stage: str,
    *,
    session: str = "",
    after_commit: bool = False,
) -> Ingested:
    """Append the session's new assistant text to STORE under STAGE (`by_content`)."""
    from git_obversa.agents.by_content import ingest_by_content

    return ingest_by_content(
        AGENT, Path(events), store, stage, event_turns, session=session, after_commit=after_commit
    )
