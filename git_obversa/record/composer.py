"""Composers: turn a stage's captured turns into `{"subject", "body"}`.

A configured composer is a shell command (`git config obversa.composer CMD`): it gets the
compose input `{"stage", "captured": [{"node", "kind", "text"}], "outcome"}` as JSON on
stdin and prints `{"subject", "body"}` as JSON. A timeout, a crash or output that is not
that gives None (and the hook's floor), or, under `obversa.strict`, stops the commit.

Without one, `builtin_compose` writes a why a reviewer reads in one screen:

- notes written on purpose (kind `note`: `git obversa record note`) come first and whole;
- from what the agent said, the sentences that carry a decision or its reason, in the
  order they were said; narration of what it is about to do ("I'll start by reading…",
  "Let me check…") and restatements of the request ("The user wants…") are left out;
- within `max_chars` (about 1,200 characters; `obversa.maxWhy`): sentences giving a
  reason first, then decisions, then other statements, never cut mid-sentence;
- the subject: what was done ("I added a retry budget…" → "Add a retry budget…"), else
  the first note, else the first reason or decision — never narration.

Turns are never glued together (the store joins the deltas of one streamed block), and
they are scrubbed together first. Everything here is one pass over the text: a commit
with thousands of turns pending costs milliseconds.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from git_obversa.record.rules import (
    CUT_MARKER,
    KEPT_MARKER,
    join_turns,
    plural,
    scrub_joined,
    usable,
)
from git_obversa.record.turns import NOTE_KIND

DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_WHY = 1200
SUBJECT_COLUMNS = 72

# A sentence ends at . ! ? before whitespace, or at the end of its paragraph.
_SENTENCE = re.compile(r".*?(?:[.!?](?=\s)|$)", re.DOTALL)
# What the agent is about to do: left out unless it also gives a reason.
_NARRATION = re.compile(
    r"(?:i'll|i will|i'm going to|i am going to|let me|let's|let us|(?:now|next|first|then"
    r"|finally)\b,? ?(?:i\b|let\b|we\b|the\b\W*\w+\W*$)?|i need to|i want to|i should"
    r"|i'm now|i am now|i can see|i see\b|i notice|looking at|checking|reading|running"
    r"|okay|ok\b|great|perfect|good[,.!]|sure|alright|all right|done[,.!]|got it"
    r"|here's what|here is what)",
    re.IGNORECASE,
)
# The request said back: always left out.
_RESTATEMENT = re.compile(
    r"(?:the user\b|user wants|the request\b|the task\b|they want|they're asking"
    r"|i'm asked|i am asked|i was asked|i've been asked)",
    re.IGNORECASE,
)
_REASON = re.compile(
    r"\b(?:because|since|so that|so the|so we|so it|so a|so no|so each|so this|therefore"
    r"|thus|hence|otherwise|to avoid|to keep|to prevent|to stop|to make sure|to ensure"
    r"|in order to|instead of|rather than|which means|that means|this means|due to"
    r"|the reason|that's why|this is why|avoids|prevents|would (?:break|fail|lose|leak)"
    r"|without (?:it|this|that)|or else\b|only safe|is safe|unsafe)",
    re.IGNORECASE,
)
# What still makes narration or a status line worth keeping: a reason said outright.
_STRONG_REASON = re.compile(
    r"\b(?:because|so that|otherwise|to avoid|to prevent|in order to|instead of|rather than"
    r"|the reason|which means|that's why|this is why|would (?:break|fail|lose|leak))",
    re.IGNORECASE,
)
# A status line: true when it was said, false on a later commit ("I have not committed it
# yet, as you asked"); the commit itself says what became of the work.
_STATUS = re.compile(
    r"\b(?:(?:have not|haven't|did not|didn't|not) (?:yet )?(?:committed|pushed)"
    r"|not (?:committed|pushed) (?:it |this |them |anything )?yet|as you asked|as requested"
    r"|as you requested|let me know|ready for (?:your )?review|want me to|shall i\b"
    r"|should i\b|i'm done|i am done|all done)",
    re.IGNORECASE,
)
# A word every _STATUS match holds: the pattern runs only on sentences that have one.
_STATUS_WORDS = ("commit", "push", "as you", "as request", "let me", "review", "me to")
_STATUS_WORDS += ("shall i", "should i", "done")
# Entries a client writes itself, not the model: never a reason.
SYNTHETIC_TEXTS = frozenset({"No response requested."})
SYNTHETIC_MODEL = "<synthetic>"
_DECISION = re.compile(
    r"\b(?:decided|chose|choose|chosen|prefer|went with|keep|kept|use|used|switch"
    r"|switched|replace|replaced|must|never|always|only|instead|cap|capped|limit"
    r"|bound|bounded|drop|dropped)\b",
    re.IGNORECASE,
)
# What was done: "I added …", "I've replaced …", "Added …".
_DONE = re.compile(
    r"(?:(?:i|we)(?:'ve| have)? (?:now )?|(?:this|the change) )?(?P<verb>[a-z]+ed|made|"
    r"gave|kept|wrote|rewrote|split|put|set|built|took|moved)\b",
    re.IGNORECASE,
)
_IMPERATIVE = {
    "made": "Make", "gave": "Give", "kept": "Keep", "wrote": "Write", "rewrote": "Rewrite",
    "split": "Split", "put": "Put", "set": "Set", "built": "Build", "took": "Take",
    "added": "Add", "fixed": "Fix", "changed": "Change", "replaced": "Replace",
    "removed": "Remove", "moved": "Move", "updated": "Update", "renamed": "Rename",
    "switched": "Switch", "implemented": "Implement", "introduced": "Introduce",
    "refactored": "Refactor", "extracted": "Extract", "wrapped": "Wrap", "capped": "Cap",
    "bounded": "Bound", "limited": "Limit", "dropped": "Drop", "reworked": "Rework",
    "documented": "Document", "tested": "Test", "covered": "Cover", "guarded": "Guard",
    "handled": "Handle", "stopped": "Stop", "restricted": "Restrict", "ensured": "Ensure",
    "enabled": "Enable", "disabled": "Disable", "allowed": "Allow", "returned": "Return",
    "raised": "Raise", "cached": "Cache", "validated": "Validate", "deleted": "Delete",
    "created": "Create", "reused": "Reuse", "retried": "Retry", "simplified": "Simplify",
    "clarified": "Clarify", "applied": "Apply", "copied": "Copy", "unified": "Unify",
}  # fmt: skip
_TIER_REASON, _TIER_DECISION, _TIER_OTHER = 0, 1, 2
# Tiers of candidates: 2 * tier, + 1 for what was only thought.
TIERS = 2 * _TIER_OTHER + 2
# The tier of a bound turn's cut marker (`record.rules.CUT_MARKER`).
CUT = 99
_LIST_ITEM = re.compile(r"\s*(?:[-*+]|\d+[.)])\s+")


def builtin_compose(
    request: dict, max_chars: int = DEFAULT_MAX_WHY, scrubbed: bool = False
) -> dict:
    """A concise why for REQUEST's captured turns (see the module docstring). The turns
    are scrubbed together first (a secret split between two of them goes too), unless
    SCRUBBED says the caller did (the hook scrubs and bounds every turn beforehand)."""
    units = join_turns(request["captured"])
    if not scrubbed:
        for unit, text in zip(units, scrub_joined([u["text"] for u in units]), strict=True):
            unit["text"] = text
    return compose_units(units, max_chars, unit_candidates)


def compose_units(units: list[dict], max_chars: int, candidates_of) -> dict:
    """`builtin_compose` of UNITS already scrubbed and bounded; CANDIDATES_OF(unit) is
    `unit_candidates`, or what a capture kept of it (`record.prepared`)."""
    notes = [_normalise(unit["text"]) for unit in units if unit["kind"] == NOTE_KIND]
    said = [unit for unit in units if unit["kind"] != NOTE_KIND and not _synthetic(unit)]
    return select(
        [note for note in notes if note], [candidates_of(unit) for unit in said], max_chars
    )


def unit_candidates(unit: dict) -> list[tuple[int, int, str]]:
    """The sentences of UNIT (a turn the agent said or thought) worth a place in the why:
    (paragraph within the unit, tier, sentence), in order. A bound turn's cut marker is
    one too, of tier CUT: shown whenever a sentence of its turn is."""
    found: list[tuple[int, int, str]] = []
    # Within a tier, what the agent said ranks above what it only thought.
    thought = int(unit["kind"] == "engine:thinking")
    for paragraph, block in enumerate(_paragraphs(unit["text"])):
        if CUT_MARKER.fullmatch(block.strip()):
            found.append((paragraph, CUT, block.strip()))
            continue
        # A list item is one sentence, marker and all.
        item = _LIST_ITEM.match(block)
        for sentence in [" ".join(block.split())] if item else _sentences(block):
            tier = _tier(sentence)
            if tier is not None:
                found.append((paragraph, 2 * tier + thought, sentence))
    return found


def select(notes: list[str], units: list[list[tuple[int, int, str]]], max_chars: int) -> dict:
    """The why made of NOTES (whole, first) and the best of the UNITS' candidate
    sentences (`unit_candidates`) within about MAX_CHARS: reasons first, then decisions,
    then other statements, in the order they were said; what did not fit is counted in a
    closing line that says where it is kept. (`Selection` gives the same, a unit at a
    time, keeping only what it may still show.)"""
    # (paragraph, order, tier, sentence, unit) for every candidate, in order.
    candidates: list[tuple[int, int, int, str, int]] = []
    paragraph = 0
    for number, found in enumerate(units):
        last = None
        for within, tier, sentence in found:
            if within != last:
                paragraph, last = paragraph + 1, within
            candidates.append((paragraph, len(candidates), tier, sentence, number))
    said = [c for c in candidates if c[2] != CUT]
    budget = _budget(notes, max_chars, len(candidates), sum(len(c[3]) + 2 for c in said))
    chosen = _choose(said, budget)
    shown_units = {candidates[order][4] for order in chosen}
    shown = [c for c in candidates if c[1] in chosen or c[2] == CUT and c[4] in shown_units]
    left = sum(1 for c in said if c[2] < 2 * _TIER_OTHER and c[1] not in chosen)
    done = next((c[3] for c in reversed(said) if _done(c[3])), None)
    best = min(said, key=lambda c: (c[2], c[1]), default=None)
    return _why(notes, shown, left, _subject(notes, done, best[3] if best else ""))


def _budget(notes: list[str], max_chars: int, count: int, counted: int) -> int:
    """The characters left for sentences once NOTES are in, of COUNT candidates whose
    sentences take COUNTED: less room for the closing line when not all will fit."""
    budget = max_chars - sum(len(note) + 2 for note in notes)
    if counted > budget:
        # Something will be left out: room for the line that says where it is.
        budget -= len(KEPT_MARKER.format(count=f"{count:,}", what="reasons")) + 2
    return budget


def _choose(said: list[tuple[int, int, int, str, int]], budget: int) -> set[int]:
    """The orders of the SAID candidates (in order) a why of BUDGET characters shows:
    each tier in turn, a sentence whenever it still fits."""
    by_tier: list[list[tuple[int, str]]] = [[] for _ in range(TIERS)]
    for _, order, tier, sentence, _ in said:
        by_tier[tier].append((order, sentence))
    chosen: set[int] = set()
    for tier in by_tier:
        for order, sentence in tier:
            # Two characters each: a space or a paragraph break at most.
            if len(sentence) + 2 <= budget:
                chosen.add(order)
                budget -= len(sentence) + 2
    return chosen


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0


def _is_entry(value: object, types: tuple) -> bool:
    return (
        isinstance(value, list)
        and len(value) == len(types)
        and all(type(item) is kind for item, kind in zip(value, types, strict=True))
    )


def _why(notes: list[str], shown: list[tuple[int, int, int, str, int]], left: int, subject: str):
    """The why of NOTES and the SHOWN candidates (in order), LEFT reasons not shown."""
    paragraphs = list(notes)
    current: list[str] = []
    current_paragraph = None
    for number, _, _, sentence, _ in shown:
        if number != current_paragraph and current:
            paragraphs.append(" ".join(current))
            current = []
        current_paragraph = number
        current.append(sentence)
    if current:
        paragraphs.append(" ".join(current))
    if left:  # said about this commit, so kept with it: the message says where
        paragraphs.append(KEPT_MARKER.format(count=f"{left:,}", what=plural(left, "reason")))
    # Items of one list stay together, one a line.
    for index in range(len(paragraphs) - 1, 0, -1):
        if _LIST_ITEM.match(paragraphs[index]) and _LIST_ITEM.match(paragraphs[index - 1]):
            paragraphs[index - 1 : index + 1] = [paragraphs[index - 1] + "\n" + paragraphs[index]]
    return {"subject": subject, "body": "\n\n".join(paragraphs)}


class Selection:
    """`select` of units given one at a time (`add`), for a capture that keeps what it
    composed (record/prepared.py): `why(notes)` is `select(notes, units, max_chars)` of
    the units added so far, and `state()` what `Selection(max_chars, state)` starts from.

    It keeps counts, the subject's two candidates, and of the sentences only those a why
    may still show: within a tier, sentences of one length are shown as a prefix of those
    of that length (once one does not fit, the budget left is smaller than it and only
    shrinks), and at most max_chars // (length + 2) of them fit, so the rest are dropped.
    A cut marker is kept with a unit that has a sentence kept. What is kept is bounded by
    max_chars, not by how many units were added."""

    FIELDS = ("paragraph", "count", "counted", "reasons", "units", "done", "best", "kept")

    def __init__(self, max_chars: int, state: dict | None = None) -> None:
        self.max_chars = max_chars
        self.paragraph = self.count = self.counted = self.reasons = self.units = 0
        self.done: str | None = None
        self.best: list | None = None  # [tier, order, sentence]
        self.kept: list[list] = []  # [paragraph, order, tier, sentence, unit], in order
        if state is not None:
            for name in self.FIELDS:
                setattr(self, name, state[name])
        self.lengths: dict[tuple[int, int], int] = {}
        for entry in self.kept:
            if entry[2] != CUT:
                key = (entry[2], len(entry[3]))
                self.lengths[key] = self.lengths.get(key, 0) + 1

    def state(self) -> dict:
        return {name: getattr(self, name) for name in self.FIELDS}

    @staticmethod
    def well_formed(state: object) -> bool:
        """Whether STATE is one `state()` gave (read back from a file: checked first)."""
        if not isinstance(state, dict) or any(name not in state for name in Selection.FIELDS):
            return False
        done, best, kept = state["done"], state["best"], state["kept"]
        return (
            all(_is_count(state[name]) for name in Selection.FIELDS[:5])
            and (done is None or isinstance(done, str))
            and (best is None or _is_entry(best, (int, int, str)))
            and isinstance(kept, list)
            and all(_is_entry(entry, (int, int, int, str, int)) for entry in kept)
            and all(entry[2] in range(TIERS) or entry[2] == CUT for entry in kept)
        )

    def add(self, found: list[tuple[int, int, str]]) -> None:
        """One more unit's `unit_candidates`."""
        last = None
        added, cuts = False, []
        for within, tier, sentence in found:
            if within != last:
                self.paragraph, last = self.paragraph + 1, within
            entry = [self.paragraph, self.count, tier, sentence, self.units]
            self.count += 1
            if tier == CUT:
                cuts.append(entry)
                continue
            self.counted += len(sentence) + 2
            self.reasons += tier < 2 * _TIER_OTHER
            if _done(sentence):
                self.done = sentence
            if self.best is None or tier < self.best[0]:
                self.best = [tier, entry[1], sentence]
            key = (tier, len(sentence))
            if self.lengths.get(key, 0) < self.max_chars // (len(sentence) + 2):
                self.lengths[key] = self.lengths.get(key, 0) + 1
                self.kept.append(entry)
                added = True
        if added and cuts:
            self.kept = sorted(self.kept + cuts, key=lambda entry: entry[1])
        self.units += 1

    def why(self, notes: list[str]) -> dict:
        """`select(NOTES, units added, max_chars)`."""
        said = [tuple(entry) for entry in self.kept if entry[2] != CUT]
        budget = _budget(notes, self.max_chars, self.count, self.counted)
        chosen = _choose(said, budget)
        shown_units = {entry[4] for entry in said if entry[1] in chosen}
        shown = [
            tuple(entry)
            for entry in self.kept
            if entry[1] in chosen or entry[2] == CUT and entry[4] in shown_units
        ]
        left = self.reasons - sum(
            1 for entry in said if entry[1] in chosen and entry[2] < 2 * _TIER_OTHER
        )
        best = self.best[2] if self.best else ""
        return _why(notes, shown, left, _subject(notes, self.done, best))


def note_text(text: str) -> str:
    """A note as the why quotes it: whole, each paragraph's whitespace collapsed."""
    return _normalise(text)


def is_synthetic(unit: dict) -> bool:
    """Whether UNIT is an entry the client made itself, never a reason."""
    return _synthetic(unit)


def _normalise(text: str) -> str:
    """TEXT with each paragraph's whitespace runs collapsed; paragraphs kept."""
    paragraphs = (" ".join(part.split()) for part in re.split(r"\n\s*\n", text))
    return "\n\n".join(part for part in paragraphs if part)


def _paragraphs(text: str) -> list[str]:
    """TEXT's paragraphs, each list item one of its own, code fences left out."""
    if "\n" not in text and not _LIST_ITEM.match(text):
        return [text] if text.strip() else []  # most turns: one line of prose
    paragraphs: list[str] = []
    current: list[str] = []
    fenced = False
    for line in text.replace("\r\n", "\n").split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        item = _LIST_ITEM.match(line)
        if (not line.strip() or item) and current:
            paragraphs.append("\n".join(current))
            current = []
        if line.strip():
            current.append(line)
        # A line that ends announcing what follows (a list, code) ends its paragraph.
        if current and line.rstrip().endswith(":"):
            paragraphs.append("\n".join(current))
            current = []
    if current:
        paragraphs.append("\n".join(current))
    return paragraphs


def _sentences(paragraph: str) -> list[str]:
    """PARAGRAPH's sentences, whitespace-normalised."""
    sentences = []
    for match in _SENTENCE.finditer(paragraph):
        sentence = " ".join(match.group(0).split())
        if sentence:
            sentences.append(sentence)
    return sentences


def _is_status(sentence: str) -> bool:
    lowered = sentence.lower()
    return any(word in lowered for word in _STATUS_WORDS) and bool(_STATUS.search(sentence))


def _synthetic(unit: dict) -> bool:
    """Whether UNIT is an entry the client made itself (Claude Code's "No response
    requested.", model `<synthetic>`), not something the model said."""
    return unit.get("model") == SYNTHETIC_MODEL or unit["text"].strip() in SYNTHETIC_TEXTS


def _tier(sentence: str) -> int | None:
    """How much SENTENCE is worth to a reviewer, or None when it is narration, a
    restated request or a status line that gives no reason."""
    bare = sentence[_LIST_ITEM.match(sentence).end() :] if _LIST_ITEM.match(sentence) else sentence
    bare = bare.lstrip("*_`> ")
    if _RESTATEMENT.match(bare) or len(bare) < 3:
        return None
    if (_NARRATION.match(bare) or _is_status(sentence)) and not _STRONG_REASON.search(sentence):
        return None
    if _REASON.search(sentence):
        return _TIER_REASON
    if sentence.endswith(":"):
        return None
    if _DECISION.search(sentence):
        return _TIER_DECISION
    return _TIER_OTHER


def _done(sentence: str) -> bool:
    """Whether SENTENCE says what was done ("I added …"): a subject in the imperative."""
    match = _DONE.match(sentence)
    return bool(match) and (match.group("verb").lower() in _IMPERATIVE or match.start("verb") > 0)


def _subject(notes: list[str], done: str | None, best: str) -> str:
    """The subject: DONE, the last sentence that says what was done, in the imperative;
    else the first note; else BEST, the first sentence of the best tier."""
    if done is not None:
        match = _DONE.match(done)
        verb = match.group("verb").lower()
        rest = done[match.end("verb") :]
        return _one_line(_IMPERATIVE.get(verb, verb.capitalize()) + rest)
    if notes:
        return _one_line(notes[0])
    return _one_line(best)


def _one_line(text: str) -> str:
    """The first sentence of TEXT as a subject: one line, at most 72 columns, cut at a
    word, no trailing period."""
    sentence = " ".join(text.split())
    for end in (". ", "? ", "! "):
        cut = sentence.find(end)
        if cut > 0:
            sentence = sentence[: cut + 1]
    sentence = sentence.rstrip(".")
    if len(sentence) <= SUBJECT_COLUMNS:
        return sentence
    for mark in (": ", "; ", " — ", ", "):
        cut = sentence.find(mark, 20, SUBJECT_COLUMNS)
        if cut > 0:
            return sentence[:cut]
    cut = sentence.rfind(" ", 0, SUBJECT_COLUMNS - 1)
    return sentence[: cut if cut > 0 else SUBJECT_COLUMNS - 1] + "…"


class ComposerFailed(Exception):
    """A configured composer gave no usable message; the text says why, in one line."""


def run_composer(
    command: str, request: dict, timeout: float = DEFAULT_TIMEOUT, cwd: str | None = None
) -> dict:
    """What COMMAND (run by the shell) printed for REQUEST; ComposerFailed otherwise.

    The command runs in a process group of its own, with its own pipes: at the timeout the
    whole group is killed (children it left in the background too), and a child that
    escaped the group holds only our pipes, never git's, so the commit does not wait.
    """
    try:
        process = subprocess.Popen(
            command,
            shell=True,
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as error:
        raise ComposerFailed(_said(command, f"could not start: {error}")) from None
    data = json.dumps(request, ensure_ascii=False).encode("utf-8")
    try:
        stdout, stderr = _exchange(process, data, timeout)
    except subprocess.TimeoutExpired:
        raise ComposerFailed(_said(command, f"gave no answer within {timeout:g} s")) from None
    finally:
        _kill_group(process)  # at the timeout, or whatever it left behind in its group
    if stderr.strip():
        sys.stderr.write(stderr.decode("utf-8", "replace")[-2000:])
    if process.returncode != 0:
        raise ComposerFailed(_said(command, f"exited {process.returncode}"))
    try:
        result = json.loads(stdout.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ComposerFailed(_said(command, "printed something that is not JSON")) from None
    if not usable(result):
        raise ComposerFailed(_said(command, 'printed no one-line "subject" and non-blank "body"'))
    return result


def _exchange(process: subprocess.Popen, data: bytes, timeout: float) -> tuple[bytes, bytes]:
    """Feed DATA to PROCESS and read its stdout and stderr until it has exited and its
    pipes are drained (a child it left running may keep them open: not waited for)."""
    import selectors  # only for a configured composer: the built-in path stays light
    import threading
    import time

    deadline = time.monotonic() + timeout
    feeder = threading.Thread(target=_feed, args=(process.stdin, data), daemon=True)
    feeder.start()
    chunks: dict[int, list[bytes]] = {process.stdout.fileno(): [], process.stderr.fileno(): []}
    with selectors.DefaultSelector() as selector:
        for stream in (process.stdout, process.stderr):
            selector.register(stream, selectors.EVENT_READ)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise subprocess.TimeoutExpired(process.args, timeout)
            exited = process.poll() is not None
            ready = selector.select(min(remaining, 0.05))
            if not ready and exited:
                break
            for key, _ in ready:
                chunk = os.read(key.fd, 65536)
                if chunk:
                    chunks[key.fd].append(chunk)
                else:
                    selector.unregister(key.fileobj)
    process.wait(max(deadline - time.monotonic(), 0.01))
    out, err = (b"".join(chunks[stream.fileno()]) for stream in (process.stdout, process.stderr))
    process.stdout.close()
    process.stderr.close()
    return out, err


def _feed(stream, data: bytes) -> None:
    try:
        stream.write(data)
        stream.close()
    except (BrokenPipeError, ValueError, OSError):
        pass  # it stopped reading: its answer (or exit status) says the rest


def _kill_group(process: subprocess.Popen) -> None:
    import signal

    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if process.returncode is None:
        process.wait()


def _said(command: str, why: str) -> str:
    return f"obversa.composer {command!r} {why}"
