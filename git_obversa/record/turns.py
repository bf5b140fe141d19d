"""The captured turns of one worktree, persisted between processes.

Capture (`git obversa record note`, agent hooks, a Python record opened with
`repository=`) appends turns; the `prepare-commit-msg` hook claims them; `post-commit`
clears the ones that went into the commit. They live under the worktree's own git dir
(`git rev-parse --git-path obversa/record`), so linked worktrees never see each other's
turns, and nothing here imports more than the standard library: the hook path stays light.

Layout of the directory:
    turns.jsonl    one JSON object per line: {"seq", "stage", "node", "kind", "text"};
                   kind is a writer turn (TURN_KINDS) or a note written on purpose;
                   the pieces of one streamed block share a "block" id: they are
                   read back as one turn, their text concatenated verbatim
    claimed.jsonl  the same, for the turns the commit in progress was composed from.
                   Still pending: an aborted commit leaves them for the next one. Turns
                   captured meanwhile go to a new turns.jsonl, so once the commit carries
                   the claimed turns, `post-commit` drops them with a plain `rm` in `sh`.
    seq            the last sequence number handed out (survives clearing)
    lock           flock()ed around every read-modify-write here (not by that `rm`)
    composed, composed.plain
                   the pending turns composed ahead of the commit (`record.
                   composition.compose_ahead`); every change here removes composed.plain first
                   (`pending.invalidate`), so write these files only through TurnStore
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path

from git_obversa.record.pending import (
    CLAIMED_FILE,
    STORE_PATH,
    TURNS_FILE,
    StoreLock,
    claim_all,
    invalidate,
    stamp,
)

TURN_KINDS = ("engine:text", "engine:thinking")
# A note a person or an agent wrote on purpose (`git obversa record note`): kept whole.
NOTE_KIND = "note"
STORED_KINDS = (*TURN_KINDS, NOTE_KIND)
# What a capture may say about a turn, kept with it into the commit's record (record/
# kept.py): the agent, its model, the session, and when it was said (ISO 8601; the time
# of capture when the capture does not know).
ABOUT = ("agent", "model", "session", "time")


class CorruptTurns(Exception):
    """The turns file holds something that is not a turn; nothing is trusted."""


class TurnStore:
    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.turns_file = self.directory / TURNS_FILE
        self.claimed_file = self.directory / CLAIMED_FILE

    @classmethod
    def for_worktree(cls, cwd: str | os.PathLike[str] | None = None) -> TurnStore:
        from git_obversa.repo import git

        return cls(git.git_path(STORE_PATH, cwd))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with StoreLock(self.directory):
            yield

    def _lines(self) -> list[dict]:
        """The pending turns of both files as stored, oldest first (a claim takes every
        turn there is). A turn in both, left by a claim cut short between its two steps,
        counts once."""
        claimed = _read_turns(self.claimed_file)
        seen = {turn["seq"] for turn in claimed}
        return claimed + [turn for turn in _read_turns(self.turns_file) if turn["seq"] not in seen]

    def _load(self) -> list[dict]:
        return _join_blocks(self._lines())

    def read(self) -> list[dict]:
        """Every pending turn, oldest first."""
        with self._locked():
            return self._load()

    def read_unlocked(self) -> list[dict]:
        """`read()` without the lock, for a git dir this process cannot write (a read-only
        mount, another user's repository): no lock can be taken there, and no writer of
        the same rights can change the store meanwhile."""
        return self._load()

    def read_stamped(self) -> tuple[list[dict], str]:
        """`read()` and the `pending.stamp` of the bytes it was read from, taken together."""
        with self._locked():
            return self._load(), stamp(self.directory)

    def claim(self, seqs: Collection[int] | None = None) -> list[dict]:
        """The pending turns whose seq is in SEQS (every one when None), now alone in
        claimed.jsonl: what the commit in progress carries. The others, and turns
        captured from now on, are in turns.jsonl, so removing claimed.jsonl once the
        commit carries its turns drops exactly those.
        """
        with self._locked():
            lines = self._lines()
            if seqs is None:
                chosen = lines
            else:
                # A joined block is claimed whole: its turn carries the highest seq.
                joined = _join_blocks(lines)
                blocks = {turn.get("block") for turn in joined if turn["seq"] in seqs}
                blocks.discard(None)
                chosen = [
                    line for line in lines if line["seq"] in seqs or line.get("block") in blocks
                ]
            taken = {line["seq"] for line in chosen}
            rest = [line for line in lines if line["seq"] not in taken]
            invalidate(self.directory)
            if rest:
                _write_turns(self.claimed_file, chosen)
                _write_turns(self.turns_file, rest)
            else:
                # Everything goes: move the lines as they are (a turn in both files
                # counts once, see _lines), without writing ten thousand turns again.
                claim_all(self.directory)
            return _join_blocks(chosen)

    def discard(self) -> None:
        """Drop every pending turn unread: the way out of a damaged store."""
        with self._locked():
            invalidate(self.directory)
            self.turns_file.unlink(missing_ok=True)
            self.claimed_file.unlink(missing_ok=True)

    def append(self, turns: Iterable[dict]) -> list[dict]:
        """Append turns ({"stage", "node", "kind", "text"}, optionally "block" and the
        strings of ABOUT); returns them with their seq."""
        with self._locked():
            seq_file = self.directory / "seq"
            try:
                last = int(seq_file.read_text())
            except (FileNotFoundError, ValueError):
                # Lost or cut short: the pending turns say how far numbering got.
                last = max((turn["seq"] for turn in self._lines()), default=0)
            added = []
            now = _now()
            for turn in turns:
                last += 1
                added.append(
                    {
                        "seq": last,
                        "stage": turn["stage"],
                        "node": turn["node"],
                        "kind": turn["kind"],
                        "text": turn["text"],
                        **({"block": turn["block"]} if turn.get("block") else {}),
                        **{key: turn[key] for key in ABOUT if isinstance(turn.get(key), str)},
                    }
                )
                added[-1].setdefault("time", now)
            if not added:
                return []
            invalidate(self.directory)
            # Scrubbed before it is written, with the turns just before it: a secret cut
            # between two of them is taken out of the one already stored too.
            from git_obversa.record.scrub import scrub_captured

            changed = scrub_captured(_tail_turns(self.turns_file), added)
            if changed:
                texts = {turn["seq"]: turn["text"] for turn in changed}
                stored = _read_turns(self.turns_file)
                for turn in stored:
                    turn["text"] = texts.get(turn["seq"], turn["text"])
                _write_turns(self.turns_file, stored + added)
            else:
                with open(self.turns_file, "a", encoding="utf-8") as handle:
                    for turn in added:
                        handle.write(json.dumps(turn, ensure_ascii=False) + "\n")
            seq_file.write_text(str(last))
            return added

    def clear(self, through_seq: int | None = None, stage: str | None = None) -> int:
        """Drop turns with seq <= through_seq (all when None), of STAGE only when given.

        Returns how many were dropped. Turns appended after through_seq stay pending.
        """
        dropped = 0
        with self._locked():
            # Each file keeps its own: claimed turns stay claimed for `post-commit`.
            for path in (self.claimed_file, self.turns_file):
                turns = _read_turns(path)
                kept = [
                    turn
                    for turn in turns
                    if (through_seq is not None and turn["seq"] > through_seq)
                    or (stage is not None and turn["stage"] != stage)
                ]
                if len(kept) != len(turns):
                    invalidate(self.directory)
                    _write_turns(path, kept)
                    dropped += len(turns) - len(kept)
        return dropped


def read_turn_file(path: str | os.PathLike[str]) -> list[dict]:
    """The turns of a file in the store's format (a kept commit's, `kept-<id>.jsonl`),
    streamed blocks joined; CorruptTurns when it holds anything else."""
    return _join_blocks(_read_turns(Path(path)))


def _now() -> str:
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _read_turns(path: Path) -> list[dict]:
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except UnicodeDecodeError as error:
        raise CorruptTurns(f"{path} is not UTF-8") from error
    lines = raw.splitlines()
    try:
        # One parse for the whole file: ten thousand turns cost milliseconds, not a second.
        turns = json.loads("[" + ",".join(line for line in lines if line.strip()) + "]")
    except json.JSONDecodeError:
        turns = None
    if turns is not None and all(map(_is_turn, turns)):
        return turns
    # Something is wrong: find the line to name.
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            turn = json.loads(line)
        except json.JSONDecodeError as error:
            raise CorruptTurns(f"{path}:{number} is not JSON") from error
        if not _is_turn(turn):
            raise CorruptTurns(f"{path}:{number} is not a captured turn")
    raise CorruptTurns(f"{path} is not one captured turn per line")


def _tail_turns(path: Path, size: int = 16384) -> list[dict]:
    """The last turns of PATH, within its last SIZE bytes (whole lines only), or the last
    turn whole when it is longer."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            start = max(handle.tell() - size, 0)
            handle.seek(start)
            lines = handle.read().split(b"\n")
    except FileNotFoundError:
        return []
    if start:
        lines = lines[1:]  # cut mid-line
    turns = []
    for line in lines:
        try:
            turn = json.loads(line)
        except ValueError:
            continue
        if _is_turn(turn):
            turns.append(turn)
    if start and not turns:
        return _read_turns(path)[-1:]
    return turns


def _join_blocks(turns: list[dict]) -> list[dict]:
    """TURNS with the pieces of each streamed block joined into one turn, at the place of
    its first piece; the joined turn has the highest seq of its pieces, so clearing through
    it clears them all."""
    joined: list[dict] = []
    blocks: dict[str, dict] = {}
    for turn in turns:
        block = turn.get("block")
        first = blocks.get(block) if block else None
        if first is None:
            turn = dict(turn)
            joined.append(turn)
            if block:
                blocks[block] = turn
        else:
            first["text"] += turn["text"]
            first["seq"] = max(first["seq"], turn["seq"])
    return joined


def _write_turns(path: Path, turns: list[dict]) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(
        "".join(json.dumps(turn, ensure_ascii=False) + "\n" for turn in turns),
        encoding="utf-8",
    )
    os.replace(temporary, path)


def _is_turn(value: object) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("seq"), int)
        and isinstance(value.get("stage"), str)
        and isinstance(value.get("node"), str)
        and value.get("kind") in STORED_KINDS
        and isinstance(value.get("text"), str)
        and isinstance(value.get("block", ""), str)
        and (len(value) <= 6 or all(isinstance(value.get(key, ""), str) for key in ABOUT))
    )
