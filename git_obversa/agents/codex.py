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
is taken once: its key is the kind and a digest of the text, so a resumed or forked
session that copies earlier items into a rollout adds nothing.
"""

from __future__ import annotations

import os

from git_obversa.agents.by_content import ingest_by_content
from git_obversa.agents.claude_code import Ingested
from git_obversa.record.turns import TurnStore

AGENT = "codex"


def rollout_turns(line: object) -> list[tuple[str, str]]:
    """(kind, text) of one rollout line: an assistant message's text, a reasoning item's
    summaries; nothing for any other line."""
    if not isinstance(line, dict) or line.get("type") != "response_item":
        return []
    item = line.get("payload")
    if not isinstance(item, dict):
        return []
    if item.get("type") == "message" and item.get("role") == "assistant":
        parts, kind, wanted = item.get("content"), "engine:text", "output_text"
    elif item.get("type") == "reasoning":
        parts, kind, wanted = item.get("summary"), "engine:thinking", "summary_text"
    else:
        return []
    if not isinstance(parts, list):
        return []
    return [
        (kind, part["text"])
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
) -> Ingested:
    """Append the rollout's new assistant text and reasoning summaries to STORE under
    STAGE, then LAST_ASSISTANT_MESSAGE (from a Stop event) when it was not taken yet.
    Returns what was taken (`Ingested`). Raises UnreadableTranscript when the rollout cannot be
    read, CorruptTurns or OSError when the store cannot be used."""
    return ingest_by_content(AGENT, rollout, store, stage, rollout_turns, last_assistant_message)
