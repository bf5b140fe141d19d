"""Capturing Aider's replies from its chat history, `.aider.chat.history.md`.

Aider has no hooks; it appends every session to that Markdown file (Aider-AI/aider,
`aider/io.py`):

    # aider chat started at 2026-03-02 10:14:03      a session starts
    #### the user's message, each line prefixed         what the user typed
    > Applied edit to client.py                          tool output, blockquoted
    the assistant's reply, plain Markdown                what we take (engine:text)

A reply's fenced code blocks (the edits themselves: the commit already holds them) are
left out, with the file name Aider writes on the line above each. `git obversa record
ingest --aider .aider.chat.history.md` reads the file and appends the replies not taken
before; a reply's key is its session, its place in the session and a digest of its text,
so running it again adds nothing, and an identical reply later in a session still counts.

Aider writes the history before it commits, so the `prepare-commit-msg` shim runs this
whenever the history in the worktree's top is newer than the last read: Aider's own
commits (made with `--no-verify`, which leaves that hook on) carry the reply that made
them.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from git_obversa.agents.claude_code import Ingested
from git_obversa.agents.transcript import UnreadableTranscript, transcript_tail
from git_obversa.record.turns import TurnStore

AGENT = "aider"
READ_STAMP = "read"  # touched at every read; the prepare-commit-msg shim compares with it
SESSION = re.compile(r"# aider chat started at (.+)")
FENCE = re.compile(r"\s*(```|~~~)")


def _prose(lines: list[str]) -> str:
    """LINES of a reply without its fenced blocks and the file name line above each."""
    kept: list[str] = []
    fenced = False
    for line in lines:
        if FENCE.match(line):
            if not fenced and kept and kept[-1].strip() and " " not in kept[-1].strip():
                kept.pop()  # `path/to/file.py` above an edit block
            fenced = not fenced
            continue
        if not fenced:
            kept.append(line)
    return "\n".join(kept).strip()


def history_replies(text: str) -> list[tuple[str, int, str]]:
    """(session, ordinal in the session, reply text) of every assistant reply in TEXT."""
    replies: list[tuple[str, int, str]] = []
    session, ordinal, reply = "", 0, []

    def close() -> None:
        nonlocal ordinal
        prose = _prose(reply)
        if prose:
            ordinal += 1
            replies.append((session, ordinal, prose))
        reply.clear()

    for line in text.split("\n"):
        started = SESSION.fullmatch(line.strip())
        if started:
            close()
            session, ordinal = started.group(1), 0
        elif line.startswith("####") or line.startswith(">"):
            close()
        else:
            reply.append(line)
    close()
    return replies


def ingest_aider(history: str | os.PathLike[str], store: TurnStore, stage: str) -> Ingested:
    """Append the replies of the chat history at HISTORY not taken before to STORE under
    STAGE; returns what was taken (`Ingested`). Raises UnreadableTranscript when the file cannot be
    read, CorruptTurns or OSError when the store cannot be used."""
    path = Path(history)
    # The tail's lock and seen ids keep two runs from taking a reply twice; the history is
    # Markdown, not JSON lines, so it is read whole (this runs by hand, not on every turn).
    with transcript_tail(store.directory / "agents" / AGENT, path) as tail:
        try:
            text = path.read_bytes().decode("utf-8", errors="replace")
        except OSError as error:
            raise UnreadableTranscript(
                f"cannot read the chat history {path}: {error.strerror or error}"
            ) from error
        found = []
        for session, ordinal, reply in history_replies(text):
            digest = hashlib.sha256(reply.encode("utf-8")).hexdigest()[:32]
            key = f"{AGENT}:{session}:{ordinal}:{digest}"
            if not tail.seen.has(key):
                tail.seen.add(key)
                found.append(reply)
        turns = store.append(
            {"stage": stage, "node": stage, "kind": "engine:text", "text": reply} for reply in found
        )
        # The commit hook reads the history again only once it is newer than this.
        (store.directory / "agents" / AGENT / READ_STAMP).touch()
        return Ingested(tail.transcript, turns)  # Markdown has no malformed lines
