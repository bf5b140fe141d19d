"""The Git AI Standard v3.0.0 authorship log: one git note per commit under `refs/notes/ai`.

A note is an attestation section (a file path at the start of a line, then two-space
indented `<key> <ranges>` lines), a line `---`, and a JSON metadata object. Keys route by
prefix: `s_<hex>::t_<hex>` to `sessions`, `h_<hex>` to `humans`, bare hex to the legacy
`prompts`. Lines no key covers are untracked. The standard, with its examples, is kept in
fixtures/attribution/ (see its README for where it came from).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field

from git_obversa.attribution import GIT_AI_REF

NOTES_REF = GIT_AI_REF
SCHEMA_VERSION = "authorship/3.0.0"
RANGES = re.compile(r"^\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*$")


class NoteError(ValueError):
    """A note that is not a Git AI authorship log."""


@dataclass(frozen=True)
class Author:
    """Who a key names: an agent session (tool, id, model) or a known human."""

    key: str
    kind: str  # "ai" or "human"
    tool: str = ""
    id: str = ""
    model: str = ""
    human: str = ""


@dataclass
class AuthorshipLog:
    # path -> [(attestation key, [(start, end), ...])], in the note's order
    files: dict[str, list[tuple[str, list[tuple[int, int]]]]] = field(default_factory=dict)
    metadata: dict = field(default_factory=dict)

    def author(self, key: str) -> Author | None:
        """The session, human or legacy prompt KEY names, as the standard routes it."""
        if key.startswith("s_"):
            session = key.split("::", 1)[0]
            record = json_object(self.metadata.get("sessions")).get(session)
        elif key.startswith("h_"):
            human = json_object(self.metadata.get("humans")).get(key)
            if not isinstance(human, dict):
                return None
            return Author(key, "human", human=str(human.get("author", "")))
        else:
            session = key
            record = json_object(self.metadata.get("prompts")).get(key)
        if not isinstance(record, dict):
            return None
        agent = json_object(record.get("agent_id"))
        return Author(
            session,
            "ai",
            tool=str(agent.get("tool", "")),
            id=str(agent.get("id", "")),
            model=str(agent.get("model", "")),
            human=str(record.get("human_author", "")),
        )

    def authors(self, path: str | None = None) -> list[Author]:
        """The authors attested on PATH (every file when None), first seen first, once."""
        found: dict[str, Author] = {}
        for name, entries in self.files.items():
            if path is not None and name != path:
                continue
            for key, _ in entries:
                author = self.author(key)
                if author is not None and author.key not in found:
                    found[author.key] = author
        return list(found.values())


def session_id(tool: str, conversation: str) -> str:
    """The standard's session id: "s_" + sha256("<tool>:<conversation id>")[:14]."""
    return "s_" + hashlib.sha256(f"{tool}:{conversation}".encode()).hexdigest()[:14]


def trace_id() -> str:
    """A fresh trace id: "t_" + 14 random hex digits (one per checkpoint, here per commit)."""
    return "t_" + os.urandom(7).hex()


def format_ranges(ranges: list[tuple[int, int]]) -> str:
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in ranges)


def parse_ranges(text: str) -> list[tuple[int, int]]:
    if not RANGES.match(text):
        raise NoteError(f"not a line range list: {text!r}")
    ranges = []
    for part in text.split(","):
        start, _, end = part.partition("-")
        first, last = int(start), int(end or start)
        if first < 1 or last < first:
            raise NoteError(f"not a line range: {part!r}")
        ranges.append((first, last))
    return ranges


def _quote_path(path: str) -> str:
    return f'"{path}"' if any(char in path for char in " \t\n") else path


def render(log: AuthorshipLog) -> str:
    """The note text of LOG."""
    lines = []
    for path, entries in log.files.items():
        if not entries:
            continue  # files with no attestation are left out
        lines.append(_quote_path(path))
        lines.extend(f"  {key} {format_ranges(ranges)}" for key, ranges in entries)
    lines.append("---")
    return "\n".join(lines) + "\n" + json.dumps(log.metadata, indent=2) + "\n"


def parse(text: str) -> AuthorshipLog:
    """An authorship log from a note's TEXT; NoteError when it is not one."""
    attestation, divider, metadata = text.partition("\n---\n")
    if not divider:
        if text.startswith("---\n"):
            attestation, metadata = "", text[4:]
        else:
            raise NoteError("no '---' line divides attestations from metadata")
    try:
        meta = json.loads(metadata)
    except json.JSONDecodeError as error:
        raise NoteError(f"the metadata is not JSON: {error}") from None
    if not isinstance(meta, dict) or not str(meta.get("schema_version", "")).startswith(
        "authorship/"
    ):
        raise NoteError("the metadata names no authorship schema_version")
    log = AuthorshipLog(metadata=meta)
    path = None
    for line in attestation.split("\n"):
        if not line.strip():
            continue
        if line.startswith("  "):
            if path is None:
                raise NoteError("an attestation line before any file path")
            key, _, ranges = line[2:].partition(" ")
            log.files[path].append((key, parse_ranges(ranges.strip())))
        else:
            path = line[1:-1] if len(line) > 1 and line[0] == line[-1] == '"' else line
            log.files.setdefault(path, [])
    return log


def json_object(value: object) -> dict:
    """VALUE when it is a JSON object, else an empty one (what a note's reader trusts)."""
    return value if isinstance(value, dict) else {}
