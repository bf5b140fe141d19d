"""`git obversa mcp`: Git memory, the Markdown corpus, `why` and the reasoning record as
an MCP server (the `mcp` package's `MCPServer`, `pip install 'git-obversa[mcp]'`).

Tools:
  memory         Anthropic's memory tool: the six commands, its field names, its result
                 text (`memory_text.py`, shared with the SDK tool)
  corpus_search  passages of the Markdown corpus that match a query
  corpus_view    a corpus file with line numbers, or a directory
  why            the commits behind lines of a file and the reasoning they record
  record_note    a note of reasoning that the next commit of this worktree carries
Resources: every memory file, as `memory://memories/<path>` (listed, and readable).

A failing call is an error result (`isError`) with one line that says what was wrong;
nothing a client sends ends the session. Only `cli/mcp.py` imports this module.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import CallToolResult, Resource, TextContent, ToolAnnotations

from git_obversa import __version__
from git_obversa.agents.memory_text import MemoryToolError, render_view, run_memory_command
from git_obversa.memory.git_memory import open_scope
from git_obversa.memory.port import MEMORY_ROOT, MemoryLimits

RESOURCE_PREFIX = "memory://memories/"
MIME_TYPES = {".md": "text/markdown", ".json": "application/json", ".py": "text/x-python"}
INSTRUCTIONS = """\
Git memory of this repository. View the memory directory (`memory` with command "view"
and path "/memories") before starting a task, and keep notes there as you work. Before
changing code, `why` tells you the reasoning recorded for its lines; `corpus_search` and
`corpus_view` read the project's Markdown docs. When you decide something the next
commit should explain, say why with `record_note`."""


@dataclass
class ServerOptions:
    """What `git obversa mcp` serves: the repository (any path in it), the memory scope
    and limits, the corpus (a directory, or with CORPUS_REV that directory of a commit's
    tree), whether writes are refused, and the stage a note is recorded for."""

    repository: str
    scope: str
    limits: MemoryLimits | Mapping[str, Any] | None = None
    corpus_dir: str | None = None
    corpus_rev: str | None = None
    read_only: bool = False
    stage: Callable[[], str] = lambda: "commit"


def _read_only_error(what: str) -> ToolError:
    return ToolError(f"{what} refused: this server was started with --read-only.")


def _answer(call: Callable[[], str]) -> CallToolResult:
    """CALL's text as the tool's result, its ToolError as an error result with exactly that
    text (raised through, the SDK would put "Error executing tool ..." before it; the
    memory tool's strings must stay the SDK memory tool's own)."""
    try:
        return CallToolResult(content=[TextContent(type="text", text=call())])
    except ToolError as error:
        return CallToolResult(content=[TextContent(type="text", text=str(error))], is_error=True)


def _parse_target(target: str) -> tuple[str, int | None, int | None]:
    """FILE, FILE:N or FILE:N-M as (path, start, end); the last colon counts."""
    path, _, spec = target.rpartition(":")
    start, dash, end = spec.partition("-")
    if not (path and start.isdecimal() and (not dash or end.isdecimal())):
        return target, None, None
    first, last = int(start), int(end) if dash else int(start)
    if first < 1 or last < first:
        raise ToolError(f"Bad line range in {target!r}: lines count from 1 and M >= N.")
    return path, first, last


def _describe_commits(path: str, commits: list[dict]) -> str:
    if not commits:
        return f"{path} has no lines to blame."
    blocks = []
    for commit in commits:
        ranges = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in commit["ranges"])
        head = (
            f"commit {commit['commit']} (lines {ranges} of {', '.join(commit['paths'])})\n"
            f"Author: {commit['author']} <{commit['email']}>\nDate: {commit['date']}\n"
            f"Subject: {commit['subject']}\n"
        )
        if commit["reasoning"] is not None:
            body = "Why:\n" + commit["reasoning"]
        elif commit["body"]:
            body = "No recorded reasoning; the commit body:\n" + commit["body"]
        else:
            body = "No recorded reasoning, and the message has no body."
        blocks.append(head + body)
    return "\n\n".join(blocks)


class ObversaServer(MCPServer):
    """The MCP server; its resource list is the memory's files at the time of asking."""

    def __init__(self, options: ServerOptions) -> None:
        super().__init__(
            name="git-obversa",
            version=__version__,
            instructions=INSTRUCTIONS,
            log_level="WARNING",  # stdout carries the protocol; stderr only what matters
        )
        self.options = options
        # Like every --scope: a name, or the digest (or a unique prefix) of a stored scope.
        self.memory = open_scope(options.repository, options.scope, options.limits)
        self._corpus: Any = None
        self._register()

    # -- memory ----------------------------------------------------------------------

    def run_memory(self, command: dict[str, Any]) -> str:
        name = command.get("command")
        if self.options.read_only and name != "view":
            raise _read_only_error(f"Memory command {name!r}")
        try:
            return run_memory_command(self.memory.execute, command)
        except MemoryToolError as error:
            raise ToolError(error.text) from None

    def memory_files(self) -> list[str]:
        """Every file path of the memory, depth first in name order."""
        found: list[str] = []

        def walk(directory: str) -> None:
            result = self.memory.execute({"command": "view", "path": directory})
            if not result["ok"] or result["value"]["kind"] != "directory":
                return
            for entry in result["value"]["entries"]:
                if entry["kind"] == "directory":
                    walk(entry["path"])
                else:
                    found.append(entry["path"])

        walk(MEMORY_ROOT)
        return found

    async def list_resources(self) -> list[Resource]:
        resources = await super().list_resources()
        for path in self.memory_files():
            relative = path[len(MEMORY_ROOT) + 1 :]
            extension = os.path.splitext(path)[1]
            resources.append(
                Resource(
                    uri=RESOURCE_PREFIX + relative,
                    name=path,
                    description=f"memory file {path} (scope {self.options.scope})",
                    mime_type=MIME_TYPES.get(extension, "text/plain"),
                )
            )
        return resources

    def read_memory_file(self, path: str) -> str:
        result = self.memory.execute({"command": "view", "path": f"{MEMORY_ROOT}/{path}"})
        if not result["ok"]:
            raise ResourceError(f"{result['error']['message']} ({MEMORY_ROOT}/{path})")
        if result["value"]["kind"] != "file":
            raise ResourceError(f"{MEMORY_ROOT}/{path} is a directory, not a file.")
        return result["value"]["text"]

    # -- corpus ----------------------------------------------------------------------

    def corpus(self) -> Any:
        if self._corpus is None:
            from git_obversa.corpus.markdown import open_markdown_corpus

            directory, rev = self.options.corpus_dir, self.options.corpus_rev
            try:
                if rev is not None:
                    repository = self.options.repository
                    self._corpus = open_markdown_corpus(directory, repository=repository, rev=rev)
                else:
                    self._corpus = open_markdown_corpus(directory or self.options.repository)
            except (TypeError, ValueError) as error:
                raise ToolError(f"The corpus cannot be opened: {error}") from None
        return self._corpus

    def corpus_search(self, query: str, limit: int) -> str:
        try:
            hits = self.corpus().search(query, limit)
        except (TypeError, ValueError, OSError) as error:
            raise ToolError(f"Search failed: {error}") from None
        if not hits:
            return f"No passage matches {query!r}."
        return "\n\n".join(
            f"{hit['path']}:{hit['passage']['start_line']}-{hit['passage']['end_line']}\n"
            + hit["passage"]["text"]
            for hit in hits
        )

    def corpus_view(self, path: str, view_range: list[int] | None) -> str:
        if not path.startswith(MEMORY_ROOT):
            path = f"{MEMORY_ROOT}/{path.lstrip('/')}".rstrip("/")
        command: dict[str, Any] = {"command": "view", "path": path, "view_range": view_range}
        try:
            return render_view(self.corpus().memory.execute, command, sizes=False)
        except MemoryToolError as error:
            raise ToolError(error.text) from None

    # -- why and the record --------------------------------------------------------

    def why(self, target: str, rev: str | None) -> str:
        from git_obversa.lookup import blame

        path, start, end = _parse_target(target)
        try:
            found = blame.lookup(self.options.repository, path, start, end, rev)
        except blame.BlameError as error:
            raise ToolError(str(error)) from None
        return _describe_commits(path, list(found.values()))

    def record_note(self, text: str, thinking: bool) -> str:
        from git_obversa.record.composition import compose_ahead
        from git_obversa.record.turns import NOTE_KIND, CorruptTurns, TurnStore
        from git_obversa.repo import git

        if self.options.read_only:
            raise _read_only_error("record_note")
        if not text.strip():
            raise ToolError("The note is empty; nothing was recorded.")
        try:
            store = TurnStore.for_worktree(self.options.repository)
            stage = self.options.stage()
            # A note is said on purpose, as `git obversa record note` says it: the composer
            # keeps it whole and first.
            kind = "engine:thinking" if thinking else NOTE_KIND
            store.append([{"stage": stage, "node": stage, "kind": kind, "text": text}])
            pending = len(store.read())
            # The commit then only copies the composition in (issue 14).
            compose_ahead(store.directory, self.options.repository)
        except (git.GitError, CorruptTurns, OSError) as error:
            raise ToolError(f"The note was not recorded: {error}") from None
        return (
            f"Recorded for stage {stage}: the next commit in this worktree carries it "
            f"({pending} pending turn{'' if pending == 1 else 's'})."
        )

    def _register(self) -> None:
        writes = not self.options.read_only
        server = self

        @self.tool(
            name="memory",
            description=(
                "Anthropic's memory tool on Git memory (files under /memories). command is "
                "view {path, view_range?}, create {path, file_text}, str_replace {path, "
                "old_str, new_str}, insert {path, insert_line, insert_text}, delete {path} or "
                "rename {old_path, new_path}."
            ),
            annotations=ToolAnnotations(read_only_hint=not writes, destructive_hint=writes),
        )
        def memory(
            command: Literal["view", "create", "str_replace", "insert", "delete", "rename"],
            path: str | None = None,
            view_range: list[int] | None = None,
            file_text: str | None = None,
            old_str: str | None = None,
            new_str: str | None = None,
            insert_line: int | None = None,
            insert_text: str | None = None,
            old_path: str | None = None,
            new_path: str | None = None,
        ) -> CallToolResult:
            given = {
                "path": path,
                "view_range": view_range,
                "file_text": file_text,
                "old_str": old_str,
                "new_str": new_str,
                "insert_line": insert_line,
                "insert_text": insert_text,
                "old_path": old_path,
                "new_path": new_path,
            }
            fields = {key: value for key, value in given.items() if value is not None}
            return _answer(lambda: server.run_memory({"command": command, **fields}))

        @self.tool(
            name="corpus_search",
            description="Search the project's Markdown corpus; the best passages first.",
            annotations=ToolAnnotations(read_only_hint=True),
        )
        def corpus_search(query: str, limit: int = 10) -> CallToolResult:
            return _answer(lambda: server.corpus_search(query, limit))

        @self.tool(
            name="corpus_view",
            description=(
                "Show a file of the Markdown corpus with line numbers (path relative to the "
                "corpus, or /memories/...), optionally lines view_range [start, end]; or "
                "list a directory."
            ),
            annotations=ToolAnnotations(read_only_hint=True),
        )
        def corpus_view(path: str = "/", view_range: list[int] | None = None) -> CallToolResult:
            return _answer(lambda: server.corpus_view(path, view_range))

        @self.tool(
            name="why",
            description=(
                "The commits that last changed lines of a file and the reasoning each "
                "recorded. target is FILE, FILE:N or FILE:N-M (relative to the repository); "
                "rev blames the file as of a commit (default: the working tree)."
            ),
            annotations=ToolAnnotations(read_only_hint=True),
        )
        def why(target: str, rev: str | None = None) -> CallToolResult:
            return _answer(lambda: server.why(target, rev))

        @self.tool(
            name="record_note",
            description=(
                "Record why you are making a change: the next commit in this worktree "
                "carries the note in its message (its Why: block)."
            ),
            annotations=ToolAnnotations(read_only_hint=not writes, destructive_hint=False),
        )
        def record_note(text: str, thinking: bool = False) -> CallToolResult:
            return _answer(lambda: server.record_note(text, thinking))

        @self.resource(
            RESOURCE_PREFIX + "{+path}",
            name="memory file",
            description="A file of Git memory, by its path below /memories.",
            mime_type="text/plain",
        )
        def memory_file(path: str) -> str:
            return server.read_memory_file(path)

        self._register_context()

    def _register_context(self) -> None:
        """The context hooks' answers in one call (agents/context_hooks.py): the reasons
        behind a range, and the memory a session is grounded in."""
        server = self

        @self.tool(
            name="reasons",
            description=(
                "The recorded reasons behind lines FIRST..LAST of a file, before you change "
                "them: each commit's subject and why, at most 2,000 characters, under a "
                "warning that it is untrusted data. Empty when no commit recorded any."
            ),
            annotations=ToolAnnotations(read_only_hint=True),
        )
        def reasons(path: str, first: int, last: int) -> CallToolResult:
            from git_obversa.lookup.context import recorded_reasons

            root = server.options.repository
            return _answer(lambda: recorded_reasons(root, path, first, last) or "No reasons.")

        @self.tool(
            name="ground",
            description=(
                "The project's memory a session starts with (`git config obversa.ground`), "
                "read into one prompt headed by an untrusted-data warning."
            ),
            annotations=ToolAnnotations(read_only_hint=True),
        )
        def ground() -> CallToolResult:
            from git_obversa.agents.context_hooks import configured
            from git_obversa.agents.session_memory import grounded

            root = server.options.repository
            settings = configured(root) or {}
            return _answer(lambda: grounded(root, settings) or "Nothing configured to ground.")


def build_server(options: ServerOptions) -> ObversaServer:
    """The server for OPTIONS; raises TypeError or MemoryFailure when the repository or
    scope cannot be used."""
    return ObversaServer(options)
