"""Capturing Gemini CLI's reasoning from its chat recording.

Gemini CLI records each session in `~/.gemini/tmp/<project>/chats/session-<time>-<id>.jsonl`
(google-gemini/gemini-cli, `chatRecordingTypes.ts`): a first line of metadata
(`{"sessionId", "projectHash", "startTime", "lastUpdated", "kind"}`), then one message
record per line,

    {"id", "timestamp", "type": "user" | "gemini" | "info" | "error" | "warning",
     "content", "thoughts": [{"subject", "description", "timestamp"}], "toolCalls", ...}

and bookkeeping lines (`{"$set": {...}}`, `{"$rewindTo": id}`). A message updated later
(its tokens, its tool calls' results) is appended again with the same `id`. What we take,
from `gemini` messages only: the `content` text (engine:text) and each thought,
`subject` and `description` (engine:thinking). User input, tool calls and their results,
info/error lines are left.

The hook (`.gemini/settings.json`, `git obversa install --gemini`) runs at `AfterAgent`,
whose `prompt_response` is the turn's final text (taken when the recording does not have
it yet), and at `BeforeTool` on `run_shell_command`: Gemini CLI flushes the recording
before a tool runs, so a commit inside a turn carries that turn's reasoning.

Each run reads only the lines written since the last (`transcript_tail`); a text is taken
once (its key is the message's id and a digest of the text), so re-appended messages,
rewinds and resumed sessions add nothing, while another session saying the same words is
its own. `prompt_response` joins every text of the turn: only its lines the recording did
not hold are taken. Text taken before a rewind stays pending: capture cannot
know the user will rewind.
"""

from __future__ import annotations

import os
from pathlib import Path

from git_obversa.agents.by_content import PROMPT, Said, ingest_by_content
from git_obversa.agents.claude_code import Ingested
from git_obversa.record.turns import TurnStore

AGENT = "gemini"


def _content_text(content: object) -> str:
    """A `PartListUnion` as text: a string, a part `{"text"}`, or a list of those."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        text = content.get("text")
        return text if isinstance(text, str) and not content.get("thought") else ""
    if isinstance(content, list):
        return "".join(_content_text(part) for part in content)
    return ""


def message_turns(record: object) -> list[Said]:
    """What one recording line says: a gemini message's thoughts, then its text (with
    the message's id); a PROMPT marker for the user's message."""
    if not isinstance(record, dict):
        return []
    if record.get("type") == "user":
        content = record.get("content")
        parts = content if isinstance(content, list) else [content]
        results = all(isinstance(part, dict) and "functionResponse" in part for part in parts)
        return [] if results and parts else [Said(PROMPT, "")]  # tool results are no prompt
    if record.get("type") != "gemini":
        return []
    ident = record.get("id") if isinstance(record.get("id"), str) else None
    turns = []
    thoughts = record.get("thoughts")
    for thought in thoughts if isinstance(thoughts, list) else []:
        if not isinstance(thought, dict):
            continue
        parts = [thought.get("subject"), thought.get("description")]
        text = "\n".join(part.strip() for part in parts if isinstance(part, str) and part.strip())
        if text:
            turns.append(Said("engine:thinking", text, ident))
    text = _content_text(record.get("content"))
    if text.strip():
        turns.append(Said("engine:text", text, ident))
    return turns


def ingest_gemini(
    recording: str | os.PathLike[str],
    store: TurnStore,
    stage: str,
    *,
    prompt_response: str | None = None,
    session: str = "",
    after_commit: bool = False,
) -> Ingested:
    """Append the recording's new gemini text and thoughts to STORE under STAGE, then
    PROMPT_RESPONSE (from an AfterAgent event) when it was not taken yet. Returns the
    turns appended. Raises UnreadableTranscript when the recording cannot be read,
    CorruptTurns or OSError when the store cannot be used."""
    return ingest_by_content(
        AGENT,
        recording,
        store,
        stage,
        message_turns,
        prompt_response,
        session=session,
        after_commit=after_commit,
    )


def folder_trusted(top: str | os.PathLike[str]) -> bool:
    """Whether Gemini CLI trusts the folder TOP (`~/.gemini/trustedFolders.json`:
    TRUST_FOLDER trusts a folder and what is under it, TRUST_PARENT its parent's; the
    deepest rule wins), or has folder trust turned off: only then does it load the
    project's `.gemini/settings.json`, hooks included."""
    import json

    home = Path(os.path.expanduser("~")) / ".gemini"
    try:
        user = json.loads((home / "settings.json").read_text(encoding="utf-8"))
        enabled = user.get("security", {}).get("folderTrust", {}).get("enabled", True)
    except (OSError, ValueError, AttributeError):
        enabled = True
    if enabled is False:
        return True
    path = os.environ.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH") or home / "trustedFolders.json"
    return trust_rules_allow(Path(path), top)


def trust_rules_allow(path: Path, top: str | os.PathLike[str]) -> bool:
    """Whether the trust rules in PATH (`trustedFolders.json`: TRUST_FOLDER trusts a
    folder and what is under it, TRUST_PARENT its parent's; the deepest rule wins) trust
    TOP. Gemini CLI's rules, which Qwen Code keeps."""
    import json

    try:
        rules = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    here = os.path.realpath(top)
    best, verdict = -1, False
    for folder, level in (rules if isinstance(rules, dict) else {}).items():
        root = os.path.realpath(os.path.expanduser(folder))
        if level == "TRUST_PARENT":
            root = os.path.dirname(root)
        inside = here == root or here.startswith(root.rstrip(os.sep) + os.sep)
        if inside and len(root) > best:
            best, verdict = len(root), level in ("TRUST_FOLDER", "TRUST_PARENT")
    return verdict
