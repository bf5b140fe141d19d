"""The reasoning record: capture a stage's writer turns, compose the commit message.

`open_reasoning_record(stage)` returns a record with `observe(event)`, `message(outcome)`
and `committed(sha)` (SPEC §7). The record makes no commit itself: whoever commits (the
`prepare-commit-msg` hook, an isolated stage) asks `message()` and reports `committed()`.

`message()` follows the §7.4 rules of `record.rules` (`compose_message`), the ones the
hook follows too.

With `repository=` the turns live in that worktree's `TurnStore` instead of memory, so
another process (the hook, `git obversa record show`) sees them and `message()` also
composes from turns other processes captured for the same stage. Like every capture, the
record then composes the pending turns ahead of the commit (`record.composition.
compose_ahead`), so the commit only copies them in: whenever the writer pauses, that is at
any other event under the stage's path (a tool call, the node's end) after new turns.
Deltas are not composed one by one: a stream would pay a composition per token.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from git_obversa.record.composition import compose_ahead
from git_obversa.record.rules import Compose, compose_message
from git_obversa.record.turns import TURN_KINDS, TurnStore
from git_obversa.repo.git import GitError


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
        self._repository = repository
        # Turns stored since the last composition ahead of the commit.
        self._uncomposed = False
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
            self._writer_paused(path)
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
        self._uncomposed = True

    def _writer_paused(self, path: list[str]) -> None:
        """After an event under this stage's path that is not a writer's delta: compose
        the turns stored since the last time ahead of the commit."""
        if not self._uncomposed or self._store is None or self._bound_path is None:
            return
        if path[: len(self._bound_path)] == self._bound_path:
            compose_ahead(self._store.directory, self._repository)
            self._uncomposed = False

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
