"""Pending turns prepared once: scrubbed, bounded and split into candidate sentences when
they are captured, so that each capture pays for its new turns only (issue 25).

A capture composes every pending turn ahead of the commit (`record.composition.
compose_ahead`). Usually `compose_tail` does it: the file `snapshot` keeps what the turns
before gave (the notes, the `composer.Selection` of what was said: bounded by maxWhy),
and only the turns appended since are read, prepared and added. Where that does not apply
(a claim in progress, streamed pieces, several stages), every turn is composed, and
`Prepared` keeps each turn's result in the store's file `prepared`, by the turn's stage,
seq, kind and text (length and CRC-32): a turn's result does not change once its
neighbours are known. Either way the turns new since are prepared together with the one
before them (a secret split across the boundary is seen whole).

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
SNAPSHOT_FORMAT = "git-obversa snapshot 2"
# How many bytes before the end of what a snapshot describes are read again to see that
# the turns file is still the one it was taken of (besides its inode): its last turn whole.
EDGE = 4096


class Tail:
    """What `compose_tail` composed: MESSAGE ({"subject", "body"}) of the STAGE's turns,
    STAMPED as `record.pending.stamp` names their bytes, and SEEN, the turns file as
    read ((inode, size, mtime) by `pending.file_state`): while it is the same, so is
    the stamp."""

    __slots__ = ("message", "seen", "stage", "stamped")

    def __init__(self, message: dict, stage: str, stamped: str, seen: tuple) -> None:
        self.message, self.stage, self.stamped, self.seen = message, stage, stamped, seen


def compose_tail(
    directory: str, settings: list[str], code: str, max_why: int, thinking: bool
) -> Tail | None:
    """The built-in composition of every turn pending in DIRECTORY, reading and preparing
    only the turns appended since the last call, or None where this does not apply (a
    claim in progress, streamed pieces, several stages, nothing pending: compose them
    all).

    The file `snapshot` keeps what the turns before gave: where they end in turns.jsonl
    (with that file's inode and the CRC-32 of its bytes and of their last EDGE bytes),
    the notes, the `composer.Selection` of what was said, and the last turn as captured
    (prepared again with the new ones: a secret across the boundary), not yet in the
    selection. SETTINGS are the composing settings it holds for. The work is bounded by
    what is new and by MAX_WHY, not by what is pending."""
    from git_obversa.record.composer import Selection
    from git_obversa.record.pending import CLAIMED_FILE, TURNS_FILE, StoreLock, file_state
    from git_obversa.record.rules import join_turns
    from git_obversa.record.turns import _is_turn

    with StoreLock(directory):
        if os.path.exists(os.path.join(directory, CLAIMED_FILE)):
            return None
        try:
            handle = open(os.path.join(directory, TURNS_FILE), "rb")
        except FileNotFoundError:
            return None
        with handle:
            status = os.fstat(handle.fileno())
            state = _snapshot(directory, [code, settings, max_why], handle, status)
            start = max(min(state["bytes"], status.st_size - EDGE), 0)
            handle.seek(start)
            read = handle.read()
        seen = file_state(directory)
    data = read[state["bytes"] - start :]
    size = start + len(read)
    if not size:
        return None
    try:
        added = json.loads(
            b"[" + b",".join(line for line in data.splitlines() if line.strip()) + b"]"
        )
    except ValueError:
        return None
    if not all(map(_is_turn, added)) or any(turn.get("block") for turn in added):
        return None
    stages = {turn["stage"] for turn in added} | ({state["stage"]} if state["stage"] else set())
    if len(stages) != 1:
        return None
    stage = stages.pop()
    selection = Selection(max_why, state["selection"])
    units = join_turns(added)
    last = state["last"]
    if not units and not last:
        return None
    if last:  # prepared again, beside the new ones
        units.insert(0, {"kind": last["kind"], "text": last["text"], "model": last.get("model")})
    ready = [
        {**unit, "text": text}
        for unit, text in zip(units, bound_turns([unit["text"] for unit in units]), strict=True)
    ]
    notes = state["notes"]
    for unit in ready[:-1]:
        _take(unit, notes, selection, thinking)
    crc = binascii.crc32(data, state["crc"])
    final = units[-1]
    state.update(
        bytes=size, crc=crc, edge=binascii.crc32(read[-EDGE:]), file=_file_id(status), stage=stage
    )
    state.update(selection=selection.state(), last={"kind": final["kind"], "text": final["text"]})
    if final.get("model"):
        state["last"]["model"] = final["model"]
    kept = {"format": SNAPSHOT_FORMAT, "key": [code, settings, max_why], **state}
    kept = json.dumps(kept, ensure_ascii=False)
    _take(ready[-1], notes, selection, thinking)
    message = selection.why(notes)
    _save_snapshot(directory, kept)
    return Tail(message, stage, f"{size}:{crc:08x}", seen)


def _take(unit: dict, notes: list[str], selection, thinking: bool) -> None:
    """UNIT (scrubbed and bounded) into the composition: a note into NOTES, what was
    said (thought, with THINKING) into SELECTION, as `composer.compose_units` takes it."""
    from git_obversa.record.composer import is_synthetic, note_text, unit_candidates
    from git_obversa.record.turns import NOTE_KIND

    if unit["kind"] == NOTE_KIND:
        if note_text(unit["text"]):
            notes.append(note_text(unit["text"]))
    elif (thinking or unit["kind"] != "engine:thinking") and not is_synthetic(unit):
        selection.add(unit_candidates(unit))


def _file_id(status: os.stat_result) -> list[int]:
    return [status.st_dev, status.st_ino]


def _snapshot(directory: str, key: list, handle, status: os.stat_result) -> dict:
    """The snapshot kept in DIRECTORY if it was made under KEY (code, settings, maxWhy) of
    the turns file open as HANDLE (STATUS) and still describes a prefix of it, else an
    empty one. The prefix is the same file (inode) of at least that size, ending in the
    same EDGE bytes: every other change of the store replaces or removes the file."""
    from git_obversa.record.composer import Selection

    empty = {
        "bytes": 0,
        "crc": 0,
        "stage": None,
        "last": None,
        "notes": [],
        "selection": Selection(key[2]).state(),
    }
    try:
        with open(
            os.path.join(directory, SNAPSHOT), encoding="utf-8", errors="surrogatepass"
        ) as stored:
            state = json.loads(stored.read())
    except (OSError, ValueError):
        return empty
    if (
        not isinstance(state, dict)
        or state.pop("format", None) != SNAPSHOT_FORMAT
        or state.pop("key", None) != key
        or not _well_formed(state)
        or state["file"] != _file_id(status)
        or state["bytes"] > status.st_size
    ):
        return empty
    handle.seek(max(state["bytes"] - EDGE, 0))
    if binascii.crc32(handle.read(min(state["bytes"], EDGE))) != state["edge"]:
        return empty
    return state


def _well_formed(state: dict) -> bool:
    """Whether STATE has the shape `compose_tail` wrote."""
    from git_obversa.record.composer import Selection

    last = state.get("last")
    numbers = ("bytes", "crc", "edge")
    return (
        all(isinstance(state.get(name), int) for name in numbers)
        and isinstance(state.get("notes"), list)
        and all(isinstance(note, str) for note in state["notes"])
        and (state.get("stage") is None or isinstance(state["stage"], str))
        and isinstance(state.get("file"), list)
        and Selection.well_formed(state.get("selection"))
        and (
            last is None
            or isinstance(last, dict)
            and isinstance(last.get("text"), str)
            and isinstance(last.get("kind"), str)
            and isinstance(last.get("model", ""), str)
        )
    )


def _save_snapshot(directory: str, text: str) -> None:
    path = os.path.join(directory, SNAPSHOT)
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8", errors="surrogatepass") as handle:
        handle.write(text)
    os.replace(temporary, path)
