"""Reading a Claude Code session transcript into captured turns.

A transcript is JSON lines, one entry per line: `{"type", "uuid", "parentUuid", "sessionId",
"timestamp", "cwd", "message", ...}`. Assistant entries carry `message.content` blocks;
`text` blocks (what the agent said) and `thinking` blocks (its reasoning) become turns,
everything else (`tool_use`, `redacted_thinking`, user entries, summaries) is ignored, and
so are side chains (sub-agents' internal work) and synthetic API-error messages.

Ingesting runs after every agent turn, so it must never take an entry twice. A cursor per
transcript, kept in the turn store's directory, records how many lines were taken and the
`uuid` and `timestamp` of the last one. The next run continues after that line when the
file still has it; when the transcript was truncated or rewritten, it continues after the
line carrying the last `uuid`, or failing that, with entries newer than the last
`timestamp`. A half-written last line (the agent is still writing) is left for next time.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from git_obversa.record.turns import TurnStore

BLOCK_KINDS = {"text": "engine:text", "thinking": "engine:thinking"}


class UnreadableTranscript(Exception):
    """The transcript cannot be read (missing, a directory, no permission)."""


@dataclass
class Entry:
    """One complete transcript line: its parsed value (None when not a JSON object)."""

    line: int
    value: dict | None


def read_entries(path: Path) -> list[Entry]:
    """Complete lines of the transcript at PATH; a trailing line without newline is left."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise UnreadableTranscript(
            f"cannot read the transcript {path}: {error.strerror or error}"
        ) from error
    lines = data.split(b"\n")
    entries = []
    for number, raw in enumerate(lines[:-1]):  # the last piece has no newline yet
        try:
            value = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            value = None
        entries.append(Entry(number, value if isinstance(value, dict) else None))
    return entries


def assistant_turns(entry: dict) -> list[tuple[str, str]]:
    """(kind, text) of the text and thinking blocks of an assistant entry, in order."""
    if (
        entry.get("type") != "assistant"
        or entry.get("isSidechain")
        or entry.get("isApiErrorMessage")
    ):
        return []
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        return []
    turns = []
    for block in content:
        if not isinstance(block, dict) or block.get("type") not in BLOCK_KINDS:
            continue
        # {"type": "text", "text": ...} / {"type": "thinking", "thinking": ...}
        text = block.get(block["type"])
        if isinstance(text, str) and text.strip():
            turns.append((BLOCK_KINDS[block["type"]], text))
    return turns


def _cursor_file(store: TurnStore, transcript: Path) -> Path:
    key = hashlib.sha256(os.fsencode(transcript.resolve())).hexdigest()[:20]
    return store.directory / "claude-code" / f"{key}.json"


@contextlib.contextmanager
def _cursor(path: Path) -> Iterator[dict]:
    """The cursor at PATH, locked; what the caller leaves in the dict is written back."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            cursor = json.loads(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            cursor = {}
        if not isinstance(cursor, dict):
            cursor = {}
        before = dict(cursor)
        yield cursor
        if cursor != before:
            temporary = path.with_suffix(".tmp")
            temporary.write_text(json.dumps(cursor), encoding="utf-8")
            os.replace(temporary, path)


def _uuid(entry: Entry) -> str | None:
    uuid = (entry.value or {}).get("uuid")
    return uuid if isinstance(uuid, str) else None


def _start(entries: list[Entry], cursor: dict) -> int:
    """Index of the first entry not yet taken, per CURSOR."""
    lines = cursor.get("lines")
    if not isinstance(lines, int) or lines <= 0:
        return 0
    if lines <= len(entries) and _uuid(entries[lines - 1]) == cursor.get("uuid"):
        return lines
    anchor = cursor.get("anchor")
    if anchor is not None:
        for entry in reversed(entries):
            if _uuid(entry) == anchor:
                return entry.line + 1
    newest = cursor.get("timestamp")
    if isinstance(newest, str):
        for entry in entries:
            stamp = (entry.value or {}).get("timestamp")
            if isinstance(stamp, str) and stamp > newest:
                return entry.line
    return len(entries)  # rewritten beyond recognition: take nothing rather than repeat


def ingest_claude_code(
    transcript: str | os.PathLike[str], store: TurnStore, stage: str
) -> list[dict]:
    """Append the transcript's new assistant text/thinking turns to STORE under STAGE.

    Returns the turns appended (with their seq). Raises UnreadableTranscript when the
    transcript cannot be read, CorruptTurns when the store is damaged, OSError when the
    store cannot be written.
    """
    transcript = Path(transcript)
    with _cursor(_cursor_file(store, transcript)) as cursor:
        entries = read_entries(transcript)
        start = _start(entries, cursor)
        added = store.append(
            {"stage": stage, "node": stage, "kind": kind, "text": text}
            for entry in entries[start:]
            if entry.value
            for kind, text in assistant_turns(entry.value)
        )
        if entries:
            anchors = [_uuid(entry) for entry in entries if _uuid(entry)]
            stamps = [(entry.value or {}).get("timestamp") for entry in entries]
            stamps = [stamp for stamp in stamps if isinstance(stamp, str)]
            cursor.update(
                transcript=str(transcript.resolve()),
                lines=len(entries),
                uuid=_uuid(entries[-1]),
                anchor=anchors[-1] if anchors else None,
                timestamp=max(stamps, default=cursor.get("timestamp")),
            )
        return added
