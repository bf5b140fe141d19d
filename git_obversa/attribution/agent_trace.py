"""Agent Trace (specification 0.1.0, RFC) trace records, kept as git notes.

A record names a revision (`vcs`), the tool that wrote it, and per file the conversations
that contributed, each with a contributor (`ai`, `human`, `mixed`, `unknown`, and a
`model_id`) and line ranges. The specification leaves storage open; a note under
`refs/notes/agent-trace` keeps the worktree clean and travels like `refs/notes/ai`.

The version field has three spellings in the wild: the published schema file wants
`X.Y`, the README's schema (since February 2026) `X.Y.Z`, the reference implementation
writes `1.0`. Records are written with `X.Y` (what the published schema accepts) and all
three are read.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from urllib.parse import quote, unquote

from git_obversa.attribution import AGENT_TRACE_REF

NOTES_REF = AGENT_TRACE_REF
VERSION = "0.1"
# Majors this reader understands: 0 (the RFC) and 1 (what the reference writes).
READ_MAJORS = ("0", "1")
VERSION_PATTERN = re.compile(r"^(\d+)\.\d+(?:\.\d+)?$")
CONTRIBUTOR_TYPES = ("human", "ai", "mixed", "unknown")
# Our link from a conversation to the agent session it was (the record has no field).
SESSION_RESOURCE = "session"
SESSION_URN = "urn:agent-session:"


class RecordError(ValueError):
    """Text that is not an Agent Trace record this reader understands."""


@dataclass(frozen=True)
class Conversation:
    """One agent session's part of a file in a record."""

    contributor: str  # one of CONTRIBUTOR_TYPES
    model: str
    tool: str
    session: str  # the agent's own conversation id, "" when unknown
    ranges: tuple[tuple[int, int], ...]


def session_link(tool: str, session: str) -> dict:
    return {"type": SESSION_RESOURCE, "url": SESSION_URN + quote(f"{tool}:{session}", safe=":")}


def build(
    revision: str,
    files: dict[str, list[Conversation]],
    tool_version: str,
    when: datetime | None = None,
) -> dict:
    """The trace record of REVISION: FILES maps a path to its conversations."""
    moment = (when or datetime.now(timezone.utc)).astimezone(timezone.utc)
    record_files = []
    for path, conversations in files.items():
        entries = []
        for conversation in conversations:
            contributor = {"type": conversation.contributor}
            if conversation.model:
                contributor["model_id"] = conversation.model[:250]
            entry: dict = {
                "contributor": contributor,
                "ranges": [{"start_line": a, "end_line": b} for a, b in conversation.ranges],
            }
            if conversation.tool and conversation.session:
                entry["related"] = [session_link(conversation.tool, conversation.session)]
            entries.append(entry)
        record_files.append({"path": path, "conversations": entries})
    return {
        "version": VERSION,
        "id": str(uuid.uuid4()),
        "timestamp": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "vcs": {"type": "git", "revision": revision},
        "tool": {"name": "git-obversa", "version": tool_version},
        "files": record_files,
    }


def render(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False) + "\n"


def parse(text: str) -> dict[str, list[Conversation]]:
    """{path: its conversations} from a note holding one record (or JSON lines of them,
    as `.agent-trace/traces.jsonl` holds); RecordError when none is readable."""
    found: dict[str, list[Conversation]] = {}
    try:
        records = [json.loads(text)]
    except json.JSONDecodeError:
        try:
            records = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as error:
            raise RecordError(f"not JSON: {error}") from None
    for record in records:
        _check(record)
        writer = record.get("tool") if isinstance(record.get("tool"), dict) else {}
        # Another tool's record names no session of ours: the tool that wrote it names
        # the agent of its `ai` and `mixed` lines.
        recorder = str(writer.get("name") or "")
        recorder = "" if recorder == "git-obversa" else recorder
        for file in record["files"]:
            conversations = found.setdefault(str(file.get("path", "")), [])
            conversations.extend(
                _conversation(entry, recorder) for entry in file.get("conversations", [])
            )
    return found


def _check(record: object) -> None:
    if not isinstance(record, dict):
        raise RecordError("a trace record is a JSON object")
    match = VERSION_PATTERN.match(str(record.get("version", "")))
    if match is None:
        raise RecordError(f"not an Agent Trace version: {record.get('version')!r}")
    if match[1] not in READ_MAJORS:
        raise RecordError(f"Agent Trace version {record['version']} is newer than this reader")
    if not isinstance(record.get("files"), list):
        raise RecordError("a trace record lists its files")


def _conversation(entry: dict, recorder: str = "") -> Conversation:
    contributor = entry.get("contributor") if isinstance(entry.get("contributor"), dict) else {}
    kind = contributor.get("type") if contributor.get("type") in CONTRIBUTOR_TYPES else "unknown"
    tool = session = ""
    for link in entry.get("related") or []:
        url = str(link.get("url", "")) if isinstance(link, dict) else ""
        if url.startswith(SESSION_URN):
            tool, _, session = unquote(url[len(SESSION_URN) :]).partition(":")
    if not tool and kind in ("ai", "mixed"):
        tool = recorder
    ranges = tuple(
        (int(r["start_line"]), int(r["end_line"]))
        for r in entry.get("ranges") or []
        if isinstance(r, dict)
        and isinstance(r.get("start_line"), int)
        and isinstance(r.get("end_line"), int)
    )
    return Conversation(kind, str(contributor.get("model_id", "")), tool, session, ranges)
