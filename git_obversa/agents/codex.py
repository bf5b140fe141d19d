"""Capturing Codex CLI's reasoning from its session rollout.

Codex writes each session to `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`,
one `{"timestamp", "type", "payload"}` per line (openai/codex, `RolloutLine`). What we take:

    {"type": "response_item", "payload": {"type": "message", "role": "assistant",
        "content": [{"type": "output_text", "text": ...}]}}           -> engine:text
    {"type": "response_item", "payload": {"type": "reasoning",
        "summary": [{"type": "summary_text", "text": ...}], ...}}      -> engine:thinking

Everything else is left: `session_meta`, `turn_context`, user and developer messages,
tool calls and their output, `compacted` summaries, and the `event_msg` lines, which
repeat the same text for the UI (`agent_message`, `agent_reasoning`). The reasoning itself
is encrypted (`encrypted_content`); its summaries are what Codex shows and what we keep.

The hook (`.codex/hooks.json`, `git obversa install --codex`) runs at `Stop` after every
turn and at `PreToolUse` before a shell command, so a `git commit` inside a turn carries
what the turn said so far. `Stop` also brings `last_assistant_message`, the turn's final
text, which is taken when the rollout does not have it yet.

Each run reads only the lines written since the last (`transcript_tail`), and each text
is taken once per session (`by_content`): a resumed session that copies earlier items into
a rollout adds nothing, and another session saying the same words is its own.
"""

from __future__ import annotations

import os

from git_obversa.agents.by_content import PROMPT, Said, ingest_by_content
from git_obversa.agents.claude_code import Ingested
from git_obversa.record.turns import TurnStore

AGENT = "codex"


def rollout_turns(line: object) -> list[Said]:
    """What one rollout line says: an assistant message's text, a reasoning item's
    summaries, a PROMPT marker for the user's message; nothing for any other line."""
    if not isinstance(line, dict) or line.get("type") != "response_item":
        return []
    item = line.get("payload")
    if not isinstance(item, dict):
        return []
    if item.get("type") == "message" and item.get("role") == "user":
        return [Said(PROMPT, "")]
    if item.get("type") == "message" and item.get("role") == "assistant":
        parts, kind, wanted = item.get("content"), "engine:text", "output_text"
    elif item.get("type") == "reasoning":
        parts, kind, wanted = item.get("summary"), "engine:thinking", "summary_text"
    else:
        return []
    if not isinstance(parts, list):
        return []
    return [
        Said(kind, part["text"])
        for part in parts
        if isinstance(part, dict)
        and part.get("type") == wanted
        and isinstance(part.get("text"), str)
        and part["text"].strip()
    ]


def ingest_codex(
    rollout: str | os.PathLike[str],
    store: TurnStore,
    stage: str,
    *,
    last_assistant_message: str | None = None,
    session: str = "",
    after_commit: bool = False,
) -> Ingested:
    """Append the rollout's new assistant text and reasoning summaries to STORE under
    STAGE, then LAST_ASSISTANT_MESSAGE (from a Stop event) when it was not taken yet.
    SESSION and AFTER_COMMIT: see `ingest_by_content`. Returns what was taken
    (`Ingested`). Raises UnreadableTranscript when the rollout cannot be read,
    CorruptTurns or OSError when the store cannot be used."""
    return ingest_by_content(
        AGENT,
        rollout,
        store,
        stage,
        rollout_turns,
        last_assistant_message,
        session=session,
        after_commit=after_commit,
    )


# Codex runs a hook from a hooks.json only once the user approved it (`/hooks` in the
# TUI): the approval is `[hooks.state."<hooks.json path>:<event>:<group>:<handler>"]
# trusted_hash = "sha256:…"` in `$CODEX_HOME/config.toml`, a digest of the handler's
# normalised definition, so an edited handler needs approving again.
EVENT_LABELS = {
    "PreToolUse": "pre_tool_use",
    "PermissionRequest": "permission_request",
    "PostToolUse": "post_tool_use",
    "PreCompact": "pre_compact",
    "PostCompact": "post_compact",
    "SessionStart": "session_start",
    "SessionEnd": "session_end",
    "UserPromptSubmit": "user_prompt_submit",
    "SubagentStart": "subagent_start",
    "SubagentStop": "subagent_stop",
    "Stop": "stop",
}
_CONTEXT_LIMIT_EVENTS = {
    "pre_tool_use",
    "post_tool_use",
    "session_start",
    "user_prompt_submit",
    "subagent_start",
}


def handler_hash(event: str, matcher: str | None, handler: dict) -> str:
    """The `trusted_hash` Codex expects for HANDLER of a group with MATCHER under EVENT."""
    import hashlib
    import json

    label = EVENT_LABELS.get(event, event.lower())
    timeout = handler.get("timeout")
    if not isinstance(timeout, int) or isinstance(timeout, bool):
        timeout = 1 if label == "session_end" else 600
    timeout = min(3, max(1, timeout)) if label == "session_end" else max(1, timeout)
    normal = {
        "type": "command",
        "command": handler.get("command"),
        "timeout": timeout,
        "async": bool(handler.get("async")),
    }
    if handler.get("statusMessage"):
        normal["statusMessage"] = handler["statusMessage"]
    limit = handler.get("additionalContextLimit")
    if label in _CONTEXT_LIMIT_EVENTS and isinstance(limit, int) and limit != 2500:
        normal["additionalContextLimit"] = limit
    identity: dict = {"event_name": label, "hooks": [normal]}
    if matcher is not None:
        identity["matcher"] = matcher
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def hook_trust(hooks_json: str | os.PathLike[str], command: str) -> dict[str, str]:
    """{state key: the hash that approves it} for every handler of HOOKS_JSON that runs
    COMMAND; {} when the file holds none (or cannot be read)."""
    import json

    try:
        with open(hooks_json, encoding="utf-8") as handle:
            hooks = json.load(handle).get("hooks")
    except (OSError, ValueError, AttributeError):
        return {}
    wanted: dict[str, str] = {}
    source = os.path.abspath(hooks_json)
    for event, groups in (hooks if isinstance(hooks, dict) else {}).items():
        label = EVENT_LABELS.get(event, event.lower())
        for group_index, group in enumerate(groups if isinstance(groups, list) else []):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for handler_index, handler in enumerate(handlers if isinstance(handlers, list) else []):
                if isinstance(handler, dict) and handler.get("command") == command:
                    key = f"{source}:{label}:{group_index}:{handler_index}"
                    wanted[key] = handler_hash(event, group.get("matcher"), handler)
    return wanted


def approved_hooks(config_toml: str | os.PathLike[str]) -> dict[str, str]:
    """{state key: trusted_hash} of Codex's user config; {} when it has none."""
    try:
        with open(config_toml, "rb") as handle:
            data = handle.read()
    except OSError:
        return {}
    try:
        import tomllib
    except ImportError:  # Python 3.10: the tables Codex itself writes, line by line
        return _approved_by_lines(data.decode("utf-8", errors="replace"))
    try:
        config = tomllib.loads(data.decode("utf-8", errors="replace"))
    except tomllib.TOMLDecodeError:
        return {}
    state = config.get("hooks", {}).get("state", {})
    return {
        key: value["trusted_hash"]
        for key, value in (state if isinstance(state, dict) else {}).items()
        if isinstance(value, dict) and isinstance(value.get("trusted_hash"), str)
    }


def _approved_by_lines(text: str) -> dict[str, str]:
    import json
    import re

    found, key = {}, None
    for line in text.splitlines():
        table = re.fullmatch(r'\s*\[hooks\.state\.("(?:[^"\\]|\\.)*")\]\s*', line)
        if table:
            key = json.loads(table.group(1))
        elif line.strip().startswith("["):
            key = None
        elif key is not None:
            value = re.fullmatch(r'\s*trusted_hash\s*=\s*"([^"]*)"\s*', line)
            if value:
                found[key] = value.group(1)
    return found


def approval_toml(trust: dict[str, str]) -> str:
    """The `[hooks.state]` tables that approve TRUST ({key: hash}) in Codex's config."""
    import json

    return "".join(
        f"[hooks.state.{json.dumps(key)}]\ntrusted_hash = {json.dumps(value)}\n"
        for key, value in trust.items()
    )


def codex_home() -> str:
    return os.environ.get("CODEX_HOME") or os.path.join(os.path.expanduser("~"), ".codex")


def project_trusted(config_toml: str | os.PathLike[str], top: str | os.PathLike[str]) -> bool:
    """Whether Codex's user config trusts the project at TOP (or a directory above it):
    only then does Codex load the project's `.codex/` files."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: no TOML reader; say nothing rather than guess
        return True
    try:
        with open(config_toml, "rb") as handle:
            projects = tomllib.load(handle).get("projects", {})
    except (OSError, tomllib.TOMLDecodeError):
        return False
    here = os.path.realpath(top)
    for path, entry in (projects if isinstance(projects, dict) else {}).items():
        if not isinstance(entry, dict) or entry.get("trust_level") != "trusted":
            continue
        root = os.path.realpath(os.path.expanduser(path))
        if here == root or here.startswith(root.rstrip(os.sep) + os.sep):
            return True
    return False
