"""Pending turns prepared once: scrubbed, bounded and split into candidate sentences when
they are captured, so that each capture pays for its new turns only (issue 25).

A capture composes every pending turn ahead of the commit (`record.composition.
compose_ahead`). Scrubbing and sentence ranking are the costly part, and a turn's result
does not change once its neighbours are known, so it is kept in the store's file
`prepared`, by the turn's stage, seq, kind and text (length and CRC-32). A capture
prepares the turns not there yet, together with the one before them (a secret split
across the boundary is seen whole), and reuses the rest; composing is then one pass that
picks sentences (`composer.select`).

Turns are scrubbed when they are captured (`TurnStore.append`); preparing scrubs them
again with their neighbours, as a commit would.
"""

from __future__ import annotations

import binascii
import json
import os

from git_obversa.record.rules import bound_turns

PREPARED = "prepared"
PREPARED_FORMAT = "git-obversa prepared 1"


def unit_key(stage: str, unit: dict) -> str:
    text = unit["text"].encode("utf-8", "surrogatepass")
    return f"{stage}\0{unit['seqs'][0]}\0{unit['kind']}\0{len(text)}\0{binascii.crc32(text)}"


class Prepared:
    """The prepared units of a store directory (None: nothing is kept, as for a Python
    record without a repository): `texts` scrubs and bounds a stage's units, reusing
    what an earlier capture did; `save` keeps what is prepared now for the next one.

    The file is JSON lines, appended to: a header `[format, code]`, then `[key, text,
    candidates]` per unit. It is written anew
    only when most of it is about turns no longer pending."""

    def __init__(self, directory: str | os.PathLike[str] | None, code: str = "") -> None:
        self.path = None if directory is None else os.path.join(os.fspath(directory), PREPARED)
        self.code = code
        self.units: dict[str, list] = {}
        self.used: set[str] = set()
        self.added: list[list] = []  # entries new or changed since the file was read
        self.fresh: set[str] = set()  # their keys
        self.lines = 0
        if self.path is not None:
            self._load()

    def _load(self) -> None:
        try:
            with open(self.path, encoding="utf-8", errors="surrogatepass") as handle:
                lines = handle.read().splitlines()
            stored = json.loads("[" + ",".join(lines) + "]")
        except (OSError, ValueError):
            return
        if not stored or stored[0] != [PREPARED_FORMAT, self.code]:
            return
        for entry in stored[1:]:
            if not (isinstance(entry, list) and entry and isinstance(entry[0], str)):
                return  # not what this module wrote: start again
            if entry[0]:
                self.units[entry[0]] = entry
        self.lines = len(stored)

    def texts(self, stage: str, units: list[dict]) -> list[str]:
        """The scrubbed, bounded text of each of UNITS (one stage's, in order)."""
        keys = [unit_key(stage, unit) for unit in units]
        for unit, key in zip(units, keys, strict=True):
            unit["key"] = key  # for `candidates`
        first = next((n for n, key in enumerate(keys) if key not in self.units), len(keys))
        start = max(first - 1, 0)
        if first < len(keys):
            window = [unit["text"] for unit in units[start:]]
            prepared = bound_turns(window)
            for key, text in zip(keys[start:], prepared, strict=True):
                if self.units.get(key, [None, None])[1] != text:
                    self.units[key] = [key, text]
                    self.fresh.add(key)
                    self.added.append(self.units[key])
        self.used.update(keys)
        return [self.units[key][1] for key in keys]

    def candidates(self, stage: str, unit: dict, compute, ready: dict) -> list:
        """COMPUTE(READY)'s result, READY being UNIT as `texts` prepared it: computed once
        per unit."""
        entry = self.units[unit.get("key") or unit_key(stage, unit)]
        if len(entry) < 3:
            entry.append(compute(ready))
            if entry[0] not in self.fresh:
                self.fresh.add(entry[0])
                self.added.append(entry)
        return entry[2]

    def save(self) -> None:
        """Keep what was prepared now for the next capture."""
        if self.path is None or not self.added:
            return
        header = [PREPARED_FORMAT, self.code]
        if self.lines and self.lines + len(self.added) < 2 * len(self.used) + 64:
            self._write(self.added, "a")
            return
        kept = [self.units[key] for key in self.units if key in self.used]
        self._write([header, *kept], "w")

    def _write(self, entries: list, mode: str) -> None:
        text = "".join(json.dumps(entry, ensure_ascii=False) + "\n" for entry in entries)
        if mode == "a":
            with open(self.path, "a", encoding="utf-8", errors="surrogatepass") as handle:
                handle.write(text)
            return
        temporary = self.path + ".tmp"
        with open(temporary, "w", encoding="utf-8", errors="surrogatepass") as handle:
            handle.write(text)
        os.replace(temporary, self.path)


# ---------------------------------------------------------------------------------------
# The tail of the store: a capture reads only the turns added since the last one

SNAPSHOT = "snapshot"
SNAPSHOT_FORMAT = "git-obversa snapshot 1"


def compose_tail(directory: str, settings: list[str], code: str, max_why: int, thinking: bool):
    """The built-in composition of every turn pending in DIRECTORY, reading and preparing
    only the turns appended since the last call: (unfinished message {"subject", "body"},
    the stage, the stamp of the turns' bytes), or None where this does not apply (a claim
    in progress, streamed pieces, several stages, a rewritten store: compose them all).

    The file `snapshot` keeps what the turns before gave: how many bytes of turns.jsonl
    and their CRC-32, the notes, each said turn's candidate sentences, the last turn as
    captured (prepared again with the new ones: a secret across the boundary). SETTINGS
    are the composing settings it holds for."""
    from git_obversa.record.composer import is_synthetic, note_text, select, unit_candidates
    from git_obversa.record.pending import CLAIMED_FILE, TURNS_FILE, StoreLock
    from git_obversa.record.rules import join_turns
    from git_obversa.record.turns import NOTE_KIND, _is_turn

    with StoreLock(directory):
        if os.path.exists(os.path.join(directory, CLAIMED_FILE)):
            return None
        try:
            with open(os.path.join(directory, TURNS_FILE), "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return None
    state = _snapshot(directory, code, settings, data)
    state.update(format=SNAPSHOT_FORMAT, code=code, settings=settings)
    try:
        added = json.loads(
            b"["
            + b",".join(line for line in data[state["bytes"] :].splitlines() if line.strip())
            + b"]"
        )
    except ValueError:
        return None
    if not all(map(_is_turn, added)) or any(turn.get("block") for turn in added):
        return None
    stages = {turn["stage"] for turn in added} | ({state["stage"]} if state["stage"] else set())
    if len(stages) != 1:
        return None
    stage = stages.pop()
    units = join_turns(added)
    last = state["last"]
    window = ([last["text"]] if last else []) + [unit["text"] for unit in units]
    texts = bound_turns(window)
    notes, candidates = state["notes"], state["candidates"]
    if last:  # prepared again, beside the new ones
        if last["role"] == "note":
            notes.pop()
        elif last["role"] == "said":
            candidates.pop()
        units.insert(0, {"kind": last["kind"], "text": last["text"], "model": last.get("model")})
    role = None
    for unit, text in zip(units, texts, strict=True):
        ready = {**unit, "text": text}
        role = None
        if unit["kind"] == NOTE_KIND:
            if note_text(text):
                notes.append(note_text(text))
                role = "note"
        elif (thinking or unit["kind"] != "engine:thinking") and not is_synthetic(ready):
            candidates.append(unit_candidates(ready))
            role = "said"
    final = units[-1] if units else None
    state.update(bytes=len(data), crc=binascii.crc32(data), stage=stage)
    if final is not None:
        state["last"] = {"kind": final["kind"], "text": final["text"], "role": role}
        if final.get("model"):
            state["last"]["model"] = final["model"]
    _save_snapshot(directory, state)
    stamped = f"{len(data)}:{binascii.crc32(data):08x}"
    return select(notes, candidates, max_why), stage, stamped


def _snapshot(directory: str, code: str, settings: list[str], data: bytes) -> dict:
    """The snapshot kept in DIRECTORY if it still describes a prefix of DATA, else an
    empty one."""
    empty = {"bytes": 0, "stage": None, "last": None, "notes": [], "candidates": []}
    try:
        with open(
            os.path.join(directory, SNAPSHOT), encoding="utf-8", errors="surrogatepass"
        ) as handle:
            state = json.loads(handle.read())
    except (OSError, ValueError):
        return empty
    if (
        not isinstance(state, dict)
        or state.get("format") != SNAPSHOT_FORMAT
        or state.get("code") != code
        or state.get("settings") != settings
        or not isinstance(state.get("bytes"), int)
        or state["bytes"] > len(data)
        or binascii.crc32(data[: state["bytes"]]) != state.get("crc")
        or not _well_formed(state)
    ):
        return empty
    return state


def _well_formed(state: dict) -> bool:
    """Whether STATE has the shape `compose_tail` wrote; an entry of a wrong type deeper
    in it fails the composition (which the commit then makes itself), never the capture."""
    last = state.get("last")
    return (
        all(isinstance(state.get(name), list) for name in ("notes", "candidates"))
        and (state.get("stage") is None or isinstance(state["stage"], str))
        and (
            last is None
            or isinstance(last, dict)
            and isinstance(last.get("text"), str)
            and isinstance(last.get("kind"), str)
            and last.get("role") in (None, "note", "said")
        )
    )


def _save_snapshot(directory: str, state: dict) -> None:
    path = os.path.join(directory, SNAPSHOT)
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8", errors="surrogatepass") as handle:
        handle.write(json.dumps(state, ensure_ascii=False))
    os.replace(temporary, path)
