"""The rules for a commit message made from captured turns (SPEC §7.4, §7.5), in one
place so the hook, the record API and the composers agree: a composer's result is used
when usable, then scrubbed and bounded; each turn is bounded on its own; otherwise the
deterministic floor.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from git_obversa.record.scrub import REDACTED, scrub, scrub_turns

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
            **({"model": turn["model"]} if turn.get("model") else {}),
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
        pieces = scrub_joined(pieces)
    bounded = []
    taken = iter(pieces)
    for text in texts:
        if len(text) <= limit:
            bounded.append(next(taken))
        else:
            bounded.append(_cut(next(taken), next(taken), len(text)))
    return bounded


# The first word of a turn that begins a sentence: never part of a secret that the turn
# before already ended with.
_SENTENCE_WORD = re.compile(r"[A-Z][a-z]+")


def scrub_joined(texts: list[str]) -> list[str]:
    """TEXTS scrubbed together (`scrub_turns`: a secret split between two turns goes
    too), without the next turn's first word: a secret that ends one turn, read on into a
    turn that begins a sentence ("access <token>" + "Revoked it afterwards…"), goes alone
    and "Revoked" stays."""
    scrubbed = scrub_turns(texts)
    for index in range(1, len(texts)):
        if not scrubbed[index - 1].endswith(REDACTED) or scrubbed[index] == texts[index]:
            continue
        alone = scrub(texts[index])
        cut = len(alone) - len(scrubbed[index])
        if cut <= 0 or not alone.endswith(scrubbed[index]):
            continue
        if _SENTENCE_WORD.fullmatch(alone[:cut]) and scrub(texts[index - 1]).endswith(REDACTED):
            scrubbed[index] = alone  # the turn before held the whole secret on its own
    return scrubbed


def bound_turn(text: str, scrubbed: bool = True) -> str:
    """One turn, scrubbed (unless SCRUBBED is False) and bounded: see `bound_turns`."""
    return bound_turns([text], scrubbed)[0]


# The marker `_cut` puts where a bound turn's middle was left out.
CUT_MARKER = re.compile(r"\[… [\d,]+ characters left out …\]")
# Where a cut may fall: after a sentence's end, else at whitespace.
_SENTENCE_END = re.compile(r"[.!?](?=\s)|\n")


def _cut(head: str, tail: str, length: int) -> str:
    """The head and tail of a turn of LENGTH characters, cut at a sentence's end (else at
    whitespace, with `…` where a sentence is broken), joined by a marker that says how
    much went."""
    ends = [m.end() for m in _SENTENCE_END.finditer(head, TURN_HEAD // 2, TURN_HEAD)]
    if ends:
        head = head[: ends[-1]].rstrip()
    else:
        cut = head.rfind(" ", TURN_HEAD // 2, TURN_HEAD)
        head = head[: cut if cut > 0 else TURN_HEAD].rstrip() + " …"
    window = len(tail) - TURN_TAIL
    found = _SENTENCE_END.search(tail, window, len(tail) - TURN_TAIL // 2)
    if found:
        tail = tail[found.end() :].lstrip()
    else:
        start = tail.find(" ", window, len(tail) - TURN_TAIL // 2)
        tail = "… " + tail[start if start >= 0 else window :].lstrip()
    left_out = length - len(head) - len(tail)
    return f"{head}\n\n[… {left_out:,} characters left out …]\n\n{tail}"


def finish(result: dict) -> dict:
    """A usable composer RESULT made safe to write: subject and body scrubbed, then the
    body bounded (§7.4 step 3)."""
    return {"subject": scrub(result["subject"]), "body": bound_body(scrub(result["body"]))}


def captured_floor(stage: str, units: list[dict], outcome: dict) -> dict:
    """The floor a commit gets when its composer failed: the captured UNITS themselves
    (already scrubbed and bounded, see `bound_turn`) as paragraphs, as many as fit in
    BODY_LIMIT, under the §7.4 floor subject. The units that do not fit are named by a
    closing marker: they are in the commit's kept record (record/kept.py)."""
    subject = floor_message(stage, 0, outcome)["subject"]
    paragraphs: list[str] = []
    size = 0
    left = 0
    for unit in units:
        text = unit["text"].strip()
        if not text:
            continue
        if left or (paragraphs and size + len(text) + 2 > BODY_LIMIT - len(KEPT_MARKER)):
            left += 1
            continue
        paragraphs.append(text)
        size += len(text) + 2
    if left:
        paragraphs.append(KEPT_MARKER.format(count=f"{left:,}", what=plural(left, "turn")))
    return {"subject": subject, "body": "\n\n".join(paragraphs)}


# Closes a message that left out something said: it is in the commit's kept record.
KEPT_MARKER = "[… {count} more {what} in the kept record: git obversa why --full …]"


def plural(count: int, word: str) -> str:
    return word if count == 1 else word + "s"


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
