"""Capture for agents whose transcript lines carry no id that survives a copy (Codex,
Gemini CLI): every text is keyed by its kind and a digest of the text, so a resumed,
forked or re-appended session adds nothing already taken.

The agent module says how one line becomes (kind, text) pairs; this module reads only
the lines written since the last run (`transcript_tail`, one cursor per transcript and
one lock per agent, shared with the agent's other transcripts) and appends what is new.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from git_obversa.agents.claude_code import Ingested
from git_obversa.agents.transcript import transcript_tail
from git_obversa.record.turns import TurnStore

Parse = Callable[[object], list[tuple[str, str]]]


def content_key(agent: str, kind: str, text: str) -> str:
    return f"{agent}:{kind}:{hashlib.sha256(text.encode('utf-8')).hexdigest()[:32]}"


def ingest_by_content(
    agent: str,
    transcript: str | os.PathLike[str],
    store: TurnStore,
    stage: str,
    parse: Parse,
    final_text: str | None = None,
) -> Ingested:
    """Append the new (kind, text) pairs PARSE finds in TRANSCRIPT's new lines to STORE
    under STAGE, then FINAL_TEXT (the turn's last message, from the hook event) when it
    was not taken yet. Returns the turns appended and the malformed lines met for the
    first time. Raises UnreadableTranscript when the
    transcript cannot be read, CorruptTurns or OSError when the store cannot be used."""
    found: list[tuple[str, str]] = []
    with transcript_tail(store.directory / "agents" / agent, Path(transcript)) as tail:
        pairs = [pair for line in tail.lines for pair in parse(line.value)]
        if isinstance(final_text, str) and final_text.strip():
            pairs.append(("engine:text", final_text))
        for kind, text in pairs:
            # No timestamp for `has`: a copy of an old line can carry a new timestamp, so
            # only the seen ids can tell.
            key = content_key(agent, kind, text)
            if not tail.seen.has(key):
                tail.seen.add(key)
                found.append((kind, text))
        turns = store.append(
            {"stage": stage, "node": stage, "kind": kind, "text": text, "agent": agent}
            for kind, text in found
        )
        return Ingested(tail.transcript, turns, tail.malformed)
