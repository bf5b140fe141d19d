"""Anthropic's memory tool on Git memory: `GitMemoryTool` and `AsyncGitMemoryTool`.

Subclasses of the Anthropic SDK's abstract memory tools (`pip install
'git-obversa[anthropic]'`), so the SDK's tool runner drives them like its own
filesystem tool:

    from anthropic import Anthropic
    from git_obversa import GitMemoryTool

    runner = Anthropic().beta.messages.tool_runner(
        model="claude-sonnet-4-5", max_tokens=2048, messages=[...],
        tools=[GitMemoryTool(".", scope="agent-notes")],
    )

Files live in the repository's private memory refs (`git obversa memory`), not in a
directory. Results are the SDK filesystem tool's strings (rendered by `memory_text.py`,
which lists where they differ); failures are raised as the SDK's `ToolError`, which the
runner returns as an `is_error` tool result. Nothing else in git-obversa imports this
module: the CLI and the hooks never load the SDK.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from anthropic.lib.tools import (
    BetaAbstractMemoryTool,
    BetaAsyncAbstractMemoryTool,
    ToolError,
)
from anyio.to_thread import run_sync

from git_obversa.agents.memory_text import FIELDS, MemoryToolError, clear_all, run_memory_command
from git_obversa.memory.git_memory import GitMemory, open_git_memory
from git_obversa.memory.port import MemoryLimits


def _fields(command: Any) -> dict[str, Any]:
    """The SDK's command model as a plain command dict. The SDK builds the model from the
    model's tool input without validating it, so a field may be missing or of any type."""
    name = command.command
    return {"command": name, **{key: getattr(command, key, None) for key in FIELDS[name]}}


class _GitMemoryBackend:
    """What both tools share: the Git memory and how a command becomes the tool's text.
    Listed first among a tool's bases, so its `__init__` runs and hands `cache_control`
    on to the SDK's class."""

    def __init__(
        self,
        repository: str = ".",
        scope: str = "agent-notes",
        *,
        limits: MemoryLimits | Mapping[str, Any] | None = None,
        overwrite: bool = True,
        cache_control: Any = None,
    ) -> None:
        super().__init__(cache_control=cache_control)  # the SDK's abstract memory tool
        self._memory: GitMemory = open_git_memory(str(repository), scope, limits)
        self._overwrite = overwrite

    @property
    def memory(self) -> GitMemory:
        """The Git memory this tool reads and writes (for `execute` with port commands)."""
        return self._memory

    def _text(self, command: Any) -> str:
        try:
            return run_memory_command(
                self._memory.execute, _fields(command), overwrite=self._overwrite
            )
        except MemoryToolError as error:
            raise ToolError(error.text) from None

    def _clear(self) -> str:
        try:
            return clear_all(self._memory.execute)
        except MemoryToolError as error:
            raise ToolError(error.text) from None


class GitMemoryTool(_GitMemoryBackend, BetaAbstractMemoryTool):
    """Anthropic's memory tool (`memory_20250818`) backed by a Git memory scope.

    `GitMemoryTool(repository=".", scope="agent-notes", *, limits=None, overwrite=True,
    cache_control=None)`. REPOSITORY is a path in a Git repository (a worktree, a
    directory in one, or a bare repository); SCOPE names the memory (one per agent or
    task). LIMITS caps the scope as `git obversa memory` does; a write beyond them evicts
    least-recently-written files and says so. With OVERWRITE false, `create` refuses an
    existing file (the SDK's filesystem tool); by default it replaces it, as Git memory's
    `create` does.
    """

    def view(self, command: Any) -> str:
        return self._text(command)

    def create(self, command: Any) -> str:
        return self._text(command)

    def str_replace(self, command: Any) -> str:
        return self._text(command)

    def insert(self, command: Any) -> str:
        return self._text(command)

    def delete(self, command: Any) -> str:
        return self._text(command)

    def rename(self, command: Any) -> str:
        return self._text(command)

    def clear_all_memory(self) -> str:
        return self._clear()


class AsyncGitMemoryTool(_GitMemoryBackend, BetaAsyncAbstractMemoryTool):
    """`GitMemoryTool` for the SDK's async tool runner (same arguments); the Git work
    runs in a worker thread."""

    async def view(self, command: Any) -> str:
        return await run_sync(self._text, command)

    async def create(self, command: Any) -> str:
        return await run_sync(self._text, command)

    async def str_replace(self, command: Any) -> str:
        return await run_sync(self._text, command)

    async def insert(self, command: Any) -> str:
        return await run_sync(self._text, command)

    async def delete(self, command: Any) -> str:
        return await run_sync(self._text, command)

    async def rename(self, command: Any) -> str:
        return await run_sync(self._text, command)

    async def clear_all_memory(self) -> str:
        return await run_sync(self._clear)
