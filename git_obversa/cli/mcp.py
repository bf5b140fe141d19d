"""`git obversa mcp`: serve this repository's memory, corpus, `why` and reasoning record
to an MCP client over stdio. Needs the optional `mcp` package."""

from __future__ import annotations

import argparse
import os

from git_obversa.cli import Failure

INSTALL_LINE = "pip install 'git-obversa[mcp]'"

EPILOG = f"""\
The server speaks MCP on stdin/stdout; an MCP client starts it. Tools: memory_view,
memory_create, memory_str_replace, memory_insert, memory_delete, memory_rename
(Anthropic's memory tool on Git memory), corpus_search and corpus_view (the Markdown
files, under /corpus), why, record_note. Each has a title, a schema for its fields and
for its structured result, and the four hints. Every memory file of every scope is a
resource (memory://<scope>/memories/<path>). Needs the mcp package:
  {INSTALL_LINE}

Claude Code (or `git obversa install --claude-code`, which also adds it to .mcp.json):
  claude mcp add obversa -- git obversa mcp
Any client that takes a command, in another directory:
  git -C /path/to/repo obversa mcp --scope agent-notes --read-only

--read-only lists and serves only the tools that change nothing (memory_view,
corpus_search, corpus_view, why).
The corpus is the Markdown files (*.md only) of --corpus-dir (default: the
repository's top directory), or of that directory of a commit's tree with --rev.
"""


def add_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    from git_obversa.cli.memory import parse_limits

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = (
        "Run an MCP server over stdio: Git memory, the Markdown corpus, why and "
        "record_note for an agent."
    )
    parser.epilog = EPILOG
    parser.add_argument(
        "--scope", help="memory scope (default: git config obversa.scope, else 'default')"
    )
    parser.add_argument(
        "--scope-digest",
        metavar="HEX",
        help="the stored scope whose digest starts with HEX (6 hex digits or more, unique)",
    )
    parser.add_argument(
        "--limits", type=parse_limits, metavar="JSON", help="memory limits, as for memory"
    )
    parser.add_argument("--corpus-dir", metavar="DIR", help="the Markdown corpus directory")
    parser.add_argument("--rev", help="read the corpus from this commit's tree")
    parser.add_argument(
        "--read-only", action="store_true", help="serve only the tools that change nothing"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from git_obversa.repo import git

    try:
        top = git.output(["rev-parse", "--show-toplevel"])
    except git.GitError as error:
        raise Failure(f"not in a Git worktree ({error}); run it inside a repository") from None
    try:
        from git_obversa.agents.mcp_server import ServerOptions, build_server
    except ImportError as error:
        if not (error.name or "").startswith("mcp"):
            raise
        raise Failure(f"the MCP server needs the mcp package; install it: {INSTALL_LINE}") from None
    from git_obversa.cli.memory import current_scope
    from git_obversa.hooks.capture import configured_stage
    from git_obversa.memory.port import MemoryFailure

    options = ServerOptions(
        repository=os.getcwd(),
        scope=current_scope(args),
        limits=args.limits,
        corpus_dir=args.corpus_dir if args.rev is not None else (args.corpus_dir or top),
        corpus_rev=args.rev,
        read_only=args.read_only,
        stage=configured_stage,
    )
    try:
        server = build_server(options)
    except TypeError as error:
        raise Failure(f"--scope: {error}") from None
    except MemoryFailure as error:
        raise Failure(f"{error.code}: {error.message}") from None
    server.run("stdio")
    return 0
