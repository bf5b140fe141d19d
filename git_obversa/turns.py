"""The captured turns of one worktree, persisted between processes.

Capture (`git obversa record note`, agent hooks, a Python record opened with
`repository=`) appends turns; the `prepare-commit-msg` hook reads them; `post-commit`
clears the ones that went into the commit. They live under the worktree's own git dir
(`git rev-parse --git-path obversa/record`), so linked worktrees never see each other's
turns, and nothing here imports more than the standard library: the hook path stays light.

Layout of the directory:
    turns.jsonl   one JSON object per line: {"seq", "stage", "node", "kind", "text"}
    seq           the last sequence number handed out (survives clearing)
    lock          flock()ed around every read-modify-write
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

TURN_KINDS = ("engine:text", "engine:thinking")
STORE_PATH = "obversa/record"


class CorruptTurns(Exception):
    """The turns file holds something that is not a turn; nothing is trusted."""


class TurnStore:
    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.turns_file = self.directory / "turns.jsonl"

    @classmethod
    def for_worktree(cls, cwd: str | os.PathLike[str] | None = None) -> TurnStore:
        from git_obversa import git

        return cls(git.git_path(STORE_PATH, cwd))

    def pending(self) -> bool:
        try:
            return self.turns_file.stat().st_size > 0
        except FileNotFoundError:
            return False

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / "lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _load(self) -> list[dict]:
        try:
            raw = self.turns_file.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except UnicodeDecodeError as error:
            raise CorruptTurns(f"{self.turns_file} is not UTF-8") from error
        turns = []
        for number, line in enumerate(raw.splitlines(), 1):
            if not line.strip():
                continue
            try:
                turn = json.loads(line)
            except json.JSONDecodeError as error:
                raise CorruptTurns(f"{self.turns_file}:{number} is not JSON") from error
            if not _is_turn(turn):
                raise CorruptTurns(f"{self.turns_file}:{number} is not a captured turn")
            turns.append(turn)
        return turns

    def _store(self, turns: list[dict]) -> None:
        temporary = self.turns_file.with_suffix(".tmp")
        temporary.write_text(
            "".join(json.dumps(turn, ensure_ascii=False) + "\n" for turn in turns),
            encoding="utf-8",
        )
        os.replace(temporary, self.turns_file)

    def read(self) -> list[dict]:
        """Every pending turn, oldest first."""
        with self._locked():
            return self._load()

    def append(self, turns: Iterable[dict]) -> list[dict]:
        """Append turns ({"stage", "node", "kind", "text"}); returns them with their seq."""
        with self._locked():
            seq_file = self.directory / "seq"
            try:
                last = int(seq_file.read_text() or 0)
            except (FileNotFoundError, ValueError):
                last = max((turn["seq"] for turn in self._load()), default=0)
            added = []
            for turn in turns:
                last += 1
                added.append(
                    {
                        "seq": last,
                        "stage": turn["stage"],
                        "node": turn["node"],
                        "kind": turn["kind"],
                        "text": turn["text"],
                    }
                )
            if not added:
                return []
            with open(self.turns_file, "a", encoding="utf-8") as handle:
                for turn in added:
                    handle.write(json.dumps(turn, ensure_ascii=False) + "\n")
            seq_file.write_text(str(last))
            return added

    def clear(self, through_seq: int | None = None, stage: str | None = None) -> int:
        """Drop turns with seq <= through_seq (all when None), of STAGE only when given.

        Returns how many were dropped. Turns appended after through_seq stay pending.
        """
        with self._locked():
            turns = self._load()
            kept = [
                turn
                for turn in turns
                if (through_seq is not None and turn["seq"] > through_seq)
                or (stage is not None and turn["stage"] != stage)
            ]
            if len(kept) != len(turns):
                self._store(kept)
            return len(turns) - len(kept)


def _is_turn(value: object) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("seq"), int)
        and isinstance(value.get("stage"), str)
        and isinstance(value.get("node"), str)
        and value.get("kind") in TURN_KINDS
        and isinstance(value.get("text"), str)
    )
