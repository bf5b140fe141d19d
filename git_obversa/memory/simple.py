"""The in-process adapter: a scope held in a dict, lost when the process exits."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from git_obversa.memory import engine
from git_obversa.memory.port import MemoryFailure, MemoryLimits, failure, validate_scope


class SimpleMemory:
    def __init__(self, scope: str, limits: MemoryLimits | Mapping[str, Any] | None = None) -> None:
        self.scope = validate_scope(scope)
        self.limits = MemoryLimits.resolve(limits)
        self.entries: dict[str, engine.Entry] = {}
        self.clock = 0
        self._texts: dict[str, str] = {}

    def read(self, path: str) -> str:
        return self._texts[path]

    def execute(self, command: Any) -> dict[str, Any]:
        try:
            result, change = engine.execute(self, command, self.limits)
            if change is not None:
                self._texts = {
                    path: change.written.get(path, self._texts.get(change.moved.get(path, path)))
                    for path in change.entries
                }
                self.entries, self.clock = change.entries, change.clock
            return result
        except Exception as error:  # an adapter never raises out of execute
            message = str(error) or "The memory adapter failed."
            return failure(command, MemoryFailure("STORAGE_ERROR", message))


def create_simple_memory(
    scope: str, limits: MemoryLimits | Mapping[str, Any] | None = None
) -> SimpleMemory:
    """A memory kept in this process (for tests and short runs)."""
    return SimpleMemory(scope, limits)
