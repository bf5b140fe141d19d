"""Capturing Qwen Code's reasoning from its chat recording.

Qwen Code (`@qwen-code/qwen-code`, checked with 0.24.4; a Gemini CLI fork) records each
session in `~/.qwen/projects/<cwd, non-alphanumerics as '-'>/chats/<session id>.jsonl`,
one record per line:

    {"uuid", "parentUuid", "sessionId", "timestamp", "cwd", "version",
     "type": "user" | "assistant" | "tool_result" | "system",
     "message": {"role", "parts": [{"text"}, {"text", "thought": true},
                                   {"functionCall": {"id", "name", "args"}}, ...]}}

A sub-agent (its `agent` tool) records into
`<project>/subagents/<session id>/agent-<agent id>.jsonl`, the same shape. What we take,
from `assistant` records only: text parts (engine:text) and thought parts
(engine:thinking), keyed by the record's uuid; a `user` record is a person's prompt (or a
sub-agent's task): a new response starts. Tool results and system records are left.

The records are written by a queue that runs beside the agent: a `PreToolUse` hook can
start before the call it announces is in the file. The event's `tool_call_id` (the
model's id for the call, as the recording writes it) is what the hook waits for.

Its hooks (`.qwen/settings.json`, `git obversa install --qwen`) have Claude Code's shape
and payloads (`hook_event_name`, `session_id`, `transcript_path`, `cwd`, `tool_name`,
`tool_input`, `tool_call_id`, `agent_id` inside a sub-agent, `last_assistant_message` at
`Stop`); timeouts are in seconds. A project's settings load only in a trusted folder
when the user has turned folder trust on (`security.folderTrust.enabled`, off by
default), and not at all with `disableAllHooks`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from git_obversa.agents.by_content import PROMPT, Said, ingest_by_content
from git_obversa.agents.claude_code import Ingested
from git_obversa.record.turns import TurnStore

AGENT = "qwen"
HOOK = "git obversa agent-hook qwen"
SETTINGS = ".qwen/settings.json"
SHELL_TOOL = "run_shell_command"


def hook_groups() -> dict[str, list[dict]]:
    """The capture hooks `install --qwen` merges into `.qwen/settings.json`."""
    handler = {"type": "command", "command": HOOK, "name": "git-obversa", "timeout": 30}
    return {
        "Stop": [{"hooks": [handler]}],
        "PreToolUse": [{"matcher": SHELL_TOOL, "hooks": [dict(handler)]}],
        "PostToolUse": [{"matcher": SHELL_TOOL, "hooks": [dict(handler)]}],
    }


def record_turns(record: object) -> list[Said]:
    """What one recording line says: an assistant record's thoughts and text (with the
    record's uuid); a PROMPT marker for a user record."""
    if not isinstance(record, dict):
        return []
    message = record.get("message")
    parts = message.get("parts") if isinstance(message, dict) else None
    if record.get("type") == "user":
        return [Said(PROMPT, "")]
    if record.get("type") != "assistant" or not isinstance(parts, list):
        return []
    ident = record.get("uuid") if isinstance(record.get("uuid"), str) else None
    thoughts, texts = [], []
    for part in parts:
        text = part.get("text") if isinstance(part, dict) else None
        if isinstance(text, str) and text.strip():
            (thoughts if part.get("thought") else texts).append(text)
    turns = [Said("engine:thinking", text, ident) for text in thoughts]
    if texts:
        turns.append(Said("engine:text", "".join(texts), ident))
    return turns


def written_mark(fields: dict) -> bytes | None:
    """What Qwen Code's recording holds once the event's moment is written: the model's id
    for the call (`tool_call_id`), or at Stop the start of the last message (taken from the
    recording, it carries the record's uuid, which a forked copy of the session keeps)."""
    ident = fields.get("tool_call_id")
    if isinstance(ident, str) and ident:
        return json.dumps(ident).encode("utf-8")
    said = fields.get("last_assistant_message")
    if fields.get("hook_event_name") != "Stop" or not isinstance(said, str) or not said.strip():
        return None
    start = said.strip().split("\n", 1)[0][:80]
    return json.dumps(start, ensure_ascii=False)[1:-1].encode("utf-8")


def subagent_transcript(transcript: str, session_id: str, agent_id: str) -> Path:
    """Where Qwen Code records a sub-agent, beside the session's `chats` directory."""
    project = Path(transcript).parent.parent
    return project / "subagents" / session_id / f"agent-{agent_id}.jsonl"


def ingest_qwen(
    recording: str | os.PathLike[str],
    store: TurnStore,
    stage: str,
    *,
    last_assistant_message: str | None = None,
    session: str = "",
    after_commit: bool = False,
) -> Ingested:
    """Append the recording's new assistant text and thoughts to STORE under STAGE, then
    the Stop event's LAST_ASSISTANT_MESSAGE when the recording does not hold it yet
    (`by_content`)."""
    return ingest_by_content(
        AGENT,
        recording,
        store,
        stage,
        record_turns,
        last_assistant_message,
        session=session,
        after_commit=after_commit,
    )


def _home() -> Path:
    return Path(os.environ.get("QWEN_HOME") or os.path.join(os.path.expanduser("~"), ".qwen"))


def _user_settings() -> dict:
    try:
        value = json.loads((_home() / "settings.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def hooks_disabled() -> bool:
    """Whether the user's Qwen Code settings turn every hook off (`disableAllHooks`)."""
    return _user_settings().get("disableAllHooks") is True


def folder_trusted(top: str | os.PathLike[str]) -> bool:
    """Whether Qwen Code loads the project settings of TOP: always, unless the user turned
    folder trust on; then only in a folder `~/.qwen/trustedFolders.json` trusts (the
    rules are Gemini CLI's)."""
    from git_obversa.agents.gemini import trust_rules_allow

    security = _user_settings().get("security")
    trust = security.get("folderTrust") if isinstance(security, dict) else None
    if not isinstance(trust, dict) or trust.get("enabled") is not True:
        return True
    path = os.environ.get("QWEN_CODE_TRUSTED_FOLDERS_PATH") or _home() / "trustedFolders.json"
    return trust_rules_allow(Path(path), top)
