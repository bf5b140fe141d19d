"""The reasoning record: capture a stage's writer turns, compose the commit message.

`open_reasoning_record(stage)` returns a record with `observe(event)`, `message(outcome)`
and `committed(sha)` (SPEC §7). The record makes no commit itself: whoever commits (the
`prepare-commit-msg` hook, an isolated stage) asks `message()` and reports `committed()`.

`compose_message()` holds the §7.4 rules in one place, so the hook and the record agree:
compose, check the result is usable, scrub subject and body, bound the body — or fall
back to the deterministic floor.

With `repository=` the turns live in that worktree's `TurnStore` instead of memory, so
another process (the hook, `git obversa record show`) sees them and `message()` also
composes from turns other processes captured for the same stage.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from git_obversa.git import GitError
from git_obversa.record.scrub import scrub, scrub_turns
from git_obversa.record.turns import TURN_KINDS, TurnStore

BODY_LIMIT = 16000
TRUNCATION_MARKER = f"\n\n[record: body truncated at {BODY_LIMIT} characters]"
# Each captured unit is bounded on its own (head and tail), so one huge turn never
# pushes the others out of a message.
TURN_HEAD = 3000
TURN_TAIL = 1000
# Scrubbing looks this far past what a bound keeps, so a secret across the cut is seen
# whole (no credential shape is longer), and a 1 MB turn costs what a 40 KB one does.
SCRUB_MARGIN = 16384

Compose = Callable[[dict], object]


def usable(result: object) -> bool:
    """Whether a composer's RESULT is a message: a one-line non-blank string "subject"
    and a non-blank string "body" (§7.4)."""
    if not isinstance(result, dict):
        return False
    subject, body = result.get("subject"), result.get("body")
    return (
        isinstance(subject, str)
        and bool(subject.strip())
        and "\n" not in subject
        and "\r" not in subject
        and isinstance(body, str)
        and bool(body.strip())
    )


def bound_body(body: str) -> str:
    """BODY cut to BODY_LIMIT characters (code points) plus the marker, if it is longer."""
    if len(body) <= BODY_LIMIT:
        return body
    return body[:BODY_LIMIT] + TRUNCATION_MARKER


def join_turns(captured: list[dict]) -> list[dict]:
    """CAPTURED turns ({"node", "text"}, optional "kind" and "seq") as units
    {"node", "kind", "text", "seqs"}: each turn its own sentence or paragraph, never
    glued to the next (the store already joins the deltas of one streamed block)."""
    return [
        {
            "node": turn["node"],
            "kind": turn.get("kind", "engine:text"),
            "text": turn["text"],
            "seqs": [turn.get("seq")],
        }
        for turn in captured
    ]


def bound_turns(texts: list[str], scrubbed: bool = True) -> list[str]:
    """TEXTS (the turns of one stage, in order) each bounded on its own: past
    TURN_HEAD + TURN_TAIL characters cut to its head and tail at whitespace around a
    marker naming what went. Unless SCRUBBED is False, scrubbed first, together
    (`scrub_turns`: a secret split between two turns goes too), and before the cut: a
    long turn is scrubbed as its head and tail with SCRUB_MARGIN more each, so a secret
    across the cut is seen whole and a 1 MB turn costs what a 40 KB one does."""
    limit = TURN_HEAD + TURN_TAIL
    pieces: list[str] = []
    for text in texts:
        if len(text) <= limit:
            pieces.append(text)
        else:
            pieces += [text[: TURN_HEAD + SCRUB_MARGIN], text[-(TURN_TAIL + SCRUB_MARGIN) :]]
    if scrubbed:
        pieces = scrub_turns(pieces)
    bounded = []
    taken = iter(pieces)
    for text in texts:
        if len(text) <= limit:
            bounded.append(next(taken))
        else:
            bounded.append(_cut(next(taken), next(taken), len(text)))
    return bounded


def bound_turn(text: str, scrubbed: bool = True) -> str:
    """One turn, scrubbed (unless SCRUBBED is False) and bounded: see `bound_turns`."""
    return bound_turns([text], scrubbed)[0]


def _cut(head: str, tail: str, length: int) -> str:
    """The head and tail of a turn of LENGTH characters, cut at whitespace, joined by a
    marker that says how much went."""
    cut = head.rfind(" ", TURN_HEAD // 2, TURN_HEAD)
    head = head[: cut if cut > 0 else TURN_HEAD].rstrip()
    start = tail.find(" ", len(tail) - TURN_TAIL, len(tail) - TURN_TAIL // 2)
    tail = tail[start if start >= 0 else len(tail) - TURN_TAIL :].lstrip()
    left_out = length - len(head) - len(tail)
    return f"{head}\n\n[… {left_out:,} characters left out …]\n\n{tail}"


def finish(result: dict) -> dict:
    """A usable composer RESULT made safe to write: subject and body scrubbed, then the
    body bounded (§7.4 step 3)."""
    return {"subject": scrub(result["subject"]), "body": bound_body(scrub(result["body"]))}


def captured_floor(stage: str, units: list[dict], outcome: dict) -> tuple[dict, list[dict]]:
    """The floor a commit gets when its composer failed: the captured UNITS themselves
    (already scrubbed and bounded, see `bound_turn`) as paragraphs, as many as fit in
    BODY_LIMIT, under the §7.4 floor subject. Returns (message, the units it carries):
    units that do not fit are not carried and stay pending."""
    subject = floor_message(stage, 0, outcome)["subject"]
    paragraphs: list[str] = []
    carried: list[dict] = []
    size = 0
    for unit in units:
        text = unit["text"].strip()
        if not text:
            carried.append(unit)
            continue
        if paragraphs and size + len(text) + 2 > BODY_LIMIT:
            break
        paragraphs.append(text)
        carried.append(unit)
        size += len(text) + 2
    return {"subject": subject, "body": "\n\n".join(paragraphs)}, carried


def floor_message(stage: str, captured_count: int, outcome: dict) -> dict:
    """The deterministic message used when composition left nothing usable (§7.4)."""
    status = outcome.get("status")
    summary = outcome.get("summary")
    said = status if summary is None else summary
    subject = scrub(" ".join(f"record({stage}): {said}".split()))
    turns = "1 captured turn" if captured_count == 1 else f"{captured_count} captured turns"
    body = "\n".join(
        [
            "## Why",
            "",
            "Composition left no message, so this is the deterministic floor: the",
            f"stage ended {status} with {turns}. The reasoning for this",
            "change was not composed, and the outcome above is what the record can",
            "state.",
        ]
    )
    return {"subject": subject, "body": body}


def _call_compose(compose: Compose, request: dict) -> object:
    try:
        result = compose(request)
        if hasattr(result, "__await__"):
            import asyncio  # only for async composers: the hook path stays light

            result = asyncio.run(result)
        return result
    except Exception:
        return None  # a failing composer never costs the commit its message: the floor


def compose_message(
    stage: str, captured: list[dict], outcome: dict, compose: Compose | None = None
) -> dict:
    """{"subject", "body"} for the turns CAPTURED ({"node", "text"}) of STAGE (§7.4, §7.5).

    COMPOSE gets {"stage", "captured": a copy, "outcome"} with the raw text; what it
    returns is used when usable (one-line non-blank subject, non-blank body), scrubbed,
    and the body bounded. Otherwise the floor.
    """
    if compose is not None:
        request = {
            "stage": stage,
            "captured": [{"node": turn["node"], "text": turn["text"]} for turn in captured],
            "outcome": dict(outcome),
        }
        result = _call_compose(compose, request)
        if usable(result):
            return finish(result)
    return floor_message(stage, len(captured), outcome)


class ReasoningRecord:
    """What one stage's writer said, kept until the commit that carries it succeeded."""

    def __init__(
        self,
        stage: str,
        path: Sequence[str] | None = None,
        compose: Compose | None = None,
        repository: str | os.PathLike[str] | None = None,
    ) -> None:
        if not isinstance(stage, str) or not stage.strip():
            raise TypeError("stage must be a non-empty string")
        self.stage = stage
        self._bound_path: list[str] | None = list(path) if path else None
        self._compose = compose
        self._turns: list[dict] = []
        self._store = None
        # The streamed block each event path is in: (kind, block id). Persisted deltas of
        # one block share the id, so the store reads them back as one turn.
        self._open_blocks: dict[tuple[str, ...], tuple[str, str]] = {}
        # Highest seq the last message() composed from; None: never asked (clear the stage).
        self._used_through: int | None = None
        if repository is not None:
            try:
                self._store = TurnStore.for_worktree(repository)
            except GitError as error:
                raise ValueError(
                    f"stage {stage} cannot record its reasoning: "
                    f"{os.fspath(repository)} is not a Git repository"
                ) from error

    def _kept_node(self, path: list[str]) -> str | None:
        """The node a writer event at PATH is captured under, or None when it is not ours."""
        if self._bound_path is None:
            if self.stage not in path:
                return None
            self._bound_path = path[: path.index(self.stage) + 1]
        if path[: len(self._bound_path)] != self._bound_path:
            return None
        return path[-1] if path else self.stage

    def observe(self, event: dict) -> None:
        """Keep EVENT ({"kind", "path", "delta"}) if it is a writer turn of this stage."""
        kind, delta = event.get("kind"), event.get("delta")
        path = [str(segment) for segment in event.get("path") or []]
        if kind not in TURN_KINDS or not isinstance(delta, str) or not delta:
            self._open_blocks.pop(tuple(path), None)  # any other event ends the block
            return
        node = self._kept_node(path)
        if node is None:
            return
        if self._store is None:
            self._turns.append({"node": node, "text": delta})
            return
        kind_and_block = self._open_blocks.get(tuple(path))
        if kind_and_block is None or kind_and_block[0] != kind:
            kind_and_block = (kind, os.urandom(8).hex())
            self._open_blocks[tuple(path)] = kind_and_block
        turn = {"stage": self.stage, "node": node, "kind": kind, "text": delta}
        self._store.append([{**turn, "block": kind_and_block[1]}])

    def _captured(self) -> list[dict]:
        if self._store is None:
            return [dict(turn) for turn in self._turns]
        turns = [turn for turn in self._store.read() if turn["stage"] == self.stage]
        self._used_through = max((turn["seq"] for turn in turns), default=0)
        return [{"node": turn["node"], "text": turn["text"]} for turn in turns]

    def message(self, outcome: dict) -> dict:
        """{"subject", "body"} for the turns kept so far; they stay kept (a retry sees them)."""
        return compose_message(self.stage, self._captured(), outcome, self._compose)

    def committed(self, sha: str) -> None:
        """The commit SHA carries the message: drop the turns it was composed from."""
        if self._store is None:
            self._turns.clear()
        else:
            self._store.clear(through_seq=self._used_through, stage=self.stage)
            self._used_through = None


def open_reasoning_record(
    stage: str,
    path: Sequence[str] | None = None,
    compose: Compose | None = None,
    repository: str | os.PathLike[str] | None = None,
) -> ReasoningRecord:
    """A record of STAGE's reasoning (SPEC §7); see `ReasoningRecord`."""
    return ReasoningRecord(stage, path=path, compose=compose, repository=repository)
