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
"transcriptPath", "stopReason"}` at `agentStop`. `git obversa install --copilot` writes one
file of its own there; each handler names its event on the command line.
"""

from __future__ import annotations

import os
from pathlib import Path

from git_obversa.agents.by_content import PROMPT, Said, ingest_by_content
from git_obversa.agents.claude_code import Ingested
from git_obversa.record.turns import TurnStore

AGENT = "copilot"
HOOK = "git obversa agent-hook copilot"
# Copilot's hook names -> the moments `hook_events` knows.
EVENTS = {
    "preToolUse": "PreToolUse",
    "postToolUse": "PostToolUse",
    "agentStop": "Stop",
    "subagentStop": "SubagentStop",
    "sessionEnd": "SessionEnd",
}
HOOKS_FILE = ".github/hooks/git-obversa.json"


def hooks_file_content() -> dict:
    """What `install --copilot` writes to `.github/hooks/git-obversa.json`."""
    return {
        "version": 1,
        "hooks": {
            name: [{"type": "command", "bash": f"{HOOK} {name}", "timeoutSec": 30}]
            for name in EVENTS
        },
    }


def event_fields(payload: dict, name: str) -> dict:
    """A Copilot hook payload in the shape the other agents send (`hook_events`)."""
    session = payload.get("sessionId") if isinstance(payload.get("sessionId"), str) else ""
    transcript = payload.get("transcriptPath")
    if not isinstance(transcript, str) or not transcript:
        home = os.environ.get("COPILOT_HOME") or os.path.join(os.path.expanduser("~"), ".copilot")
        transcript = os.path.join(home, "session-state", session, "events.jsonl") if session else ""
    return {
        "hook_event_name": EVENTS.get(name, name),
        "session_id": session,
        "transcript_path": transcript,
        "cwd": payload.get("cwd"),
        "tool_name": payload.get("toolName"),
        "tool_input": payload.get("toolArgs"),
    }


def event_turns(line: object) -> list[Said]:
    """What one events.jsonl line says: an assistant message's text; a PROMPT marker for
    the user's message."""
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
    return ingest_by_content(
        AGENT, Path(events), store, stage, event_turns, session=session, after_commit=after_commit
    )
