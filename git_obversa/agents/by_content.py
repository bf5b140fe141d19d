"""Capture for agents whose transcript lines carry no id that survives a copy (Codex,
Gemini CLI).

The agent module says how one line becomes `Said` items: (kind, text, message id or
None), and which lines are a person's prompt (a new response starts). This module reads
only the lines written since the last run (`transcript_tail`, one cursor per transcript
and one lock per agent) and appends what is new.

What counts as taken before: a text is keyed by the session it belongs to (the session's
id, which a resumed session keeps) and the message id when the agent writes one (Gemini
re-appends an updated message under its id), else a digest of the text. So a resumed or
re-appended session adds nothing, and a new, unrelated session that says the same words
("Running the tests now.") is captured as its own.

The turn's final message from the hook event (`final_text`) is often every text of the
turn joined (Gemini's `prompt_response`): only its lines that the turn's own texts do not
already hold are taken.

After the agent's own commit (`after_commit`), what it says until it works on is its
report on that commit, not the reasoning of a later one: it is marked taken and dropped.
"""

from __future__ import annotations

import hashlib
import os
from collections import namedtuple
from collections.abc import Callable
from pathlib import Path

from git_obversa.agents.claude_code import Ingested
from git_obversa.agents.transcript import transcript_tail
from git_obversa.record.turns import TurnStore

PROMPT = "prompt"  # the kind of a Said that marks a person's prompt (no text taken)


# One thing said: its KIND (engine:text, engine:thinking, or PROMPT), its TEXT, and IDENT,
# the message's own id when the agent writes one (else None).
Said = namedtuple("Said", "kind text ident", defaults=(None,))


Parse = Callable[[object], list[Said]]


def content_keys(agent: str, session: str, said: Said) -> list[str]:
    """The keys SAID is known by: its text in its session (whitespace aside), and its
    message id when it has one. Taken once any of them was seen."""
    digest = hashlib.sha256(_compact(said.text).encode("utf-8")).hexdigest()[:32]
    keys = [f"{agent}:session:{session}:{said.kind}:{digest}"]
    if said.ident:
        keys.append(f"{agent}:id:{said.ident}:{said.kind}:{digest}")
    return [" ".join(key.split()) for key in keys]


def _compact(text: str) -> str:
    return "".join(text.split())


def _new_lines(final_text: str, turn: list[str]) -> str:
    """The lines of FINAL_TEXT that the turn's texts (compacted) do not hold."""
    held = "".join(turn)
    if _compact(final_text) in held:
        return ""
    kept = [line for line in final_text.split("\n") if _compact(line) not in held]
    return "\n".join(kept).strip("\n")


def ingest_by_content(
    agent: str,
    transcript: str | os.PathLike[str],
    store: TurnStore,
    stage: str,
    parse: Parse,
    final_text: str | None = None,
    *,
    session: str = "",
    after_commit: bool = False,
) -> Ingested:
    """Append the new texts PARSE finds in TRANSCRIPT's new lines to STORE under STAGE,
    then what FINAL_TEXT (the turn's last message, from the hook event) adds. SESSION
    scopes the keys of texts without an id; AFTER_COMMIT drops what is new (see the module
    docstring). Returns the turns appended and the malformed lines met for the first
    time. Raises UnreadableTranscript when the transcript cannot be read, CorruptTurns or
    OSError when the store cannot be used."""
    found: list[Said] = []
    with transcript_tail(store.directory / "agents" / agent, Path(transcript)) as tail:
        turn = [text for text in tail.state.get("turn", []) if isinstance(text, str)]
        said: list[Said] = []
        for line in tail.lines:
            for item in parse(line.value):
                if item.kind == PROMPT:
                    turn = []  # the texts before it were another turn's
                elif item.kind == "engine:text":
                    turn.append(_compact(item.text))
                    said.append(item)
                else:
                    said.append(item)
        also: list[Said] = []  # known too: the lines of a final text, written later
        if isinstance(final_text, str) and final_text.strip():
            rest = _new_lines(final_text, turn)
            if rest.strip():
                said.append(Said("engine:text", rest))
                turn.append(_compact(rest))
                lines = [line for line in rest.split("\n") if line.strip()]
                also = [Said("engine:text", line) for line in lines if len(lines) > 1]
        for item in said:
            # No timestamp for `has`: a copy of an old line can carry a new timestamp, so
            # only the seen ids can tell.
            keys = content_keys(agent, session, item)
            if not any(tail.seen.has(key) for key in keys):
                found.append(item)
            for key in keys:
                tail.seen.add(key)
        for item in also:
            for key in content_keys(agent, session, item):
                tail.seen.add(key)
        tail.state["turn"] = turn
        if after_commit:
            found = []
        turns = store.append(
            {"stage": stage, "node": stage, "kind": item.kind, "text": item.text, "agent": agent}
            for item in found
        )
        return Ingested(tail.transcript, turns, tail.malformed)
