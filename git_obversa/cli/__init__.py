"""`git obversa`: argument parsing and dispatch.

Each command group lives in its own module with `add_arguments(parser)`; that function
registers `run=<function>` on the parser. Only the chosen group's module is imported, so
`git obversa hook ...` starts without loading the memory engine or dulwich.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# name -> (module, one-line help). The order is the order of `git obversa --help`.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("demo", "make a throwaway repository and show what git-obversa does"),
    "memory": ("memory", "read and write memory files kept in private Git refs"),
    "record": ("record", "capture the reasoning that goes into the next commit"),
    "agent-hook": ("agent_hook", "capture reasoning from an agent's hook event (stdin)"),
    "hook": ("hook", "run a Git hook (called by the installed hook scripts)"),
    "install": ("install", "install the commit hooks into this repository"),
    "uninstall": ("install", "remove the commit hooks and restore what was there"),
    "isolated": ("isolated", "run a command in its own worktree and land its commit"),
    "why": ("why", "show the recorded reasoning behind lines of a file"),
    "blame": ("why", "git blame with the first line of each commit's reasoning"),
    "log": ("why", "commits that carry reasoning, newest first"),
    "corpus": ("corpus", "search and view a Markdown corpus"),
    "web": ("web", "serve a local read-only page: files with their why, log, memory"),
    "mcp": ("mcp", "serve memory, the corpus, why and notes to an MCP client (stdio)"),
    "ground": ("mechanics", "read memory sources into one warned prompt"),
    "curate": ("mechanics", "let a command pick grounded documents and write a brief"),
    "consolidate": ("mechanics", "fold sources into one memory file with a command"),
}


class Failure(Exception):
    """A handled failure: printed as one line on stderr, exit status 1."""


def print_json(value: object) -> None:
    import json  # only for --json: every command pays for what it imports

    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2) + "\n")


def build_parser(chosen: str | None) -> argparse.ArgumentParser:
    """The parser of every command; with CHOSEN, of that command alone (which is all that
    parsing its arguments needs, and a few milliseconds cheaper)."""
    parser = argparse.ArgumentParser(
        prog="git obversa",
        description="Keep why a change was made next to the change itself.",
    )
    from git_obversa import __version__

    parser.add_argument("--version", action="version", version=f"git-obversa {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, text) in COMMANDS.items():
        if chosen is not None and name != chosen:
            continue
        command_parser = sub.add_parser(name, help=text, description=text)
        if name == chosen:
            group = importlib.import_module(f"git_obversa.cli.{module}")
            group.add_arguments(command_parser, name)
    return parser


def main(argv: list[str] | None = None) -> int:
    program = argv is None  # run as the git-obversa program, not called in-process
    argv = sys.argv[1:] if argv is None else argv
    # The command comes first (the only option before it is -h, which lists them all).
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    args = parser.parse_args(argv)
    run = getattr(args, "run", None)
    if run is None:
        parser.print_help()
        return 0 if args.command is None and not argv else 2
    try:
        status = run(args) or 0
        sys.stdout.flush()  # inside the try: a reader that went away is handled below
    except Failure as failure:
        print(f"git obversa {args.command}: {failure}", file=sys.stderr)
        status = 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `git obversa ... | head`: the reader has what it wanted. Quiet, like git; point
        # stdout at /dev/null so the interpreter's final flush cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    if program and getattr(args, "exit_at_once", False):
        _exit_at_once(status)
    return status


def _exit_at_once(status: int) -> None:
    """End the process now, its output flushed, skipping Python's teardown: 5-7 ms that
    `git obversa why`, held to 1.3x the time of git blame, cannot spare (measured in
    docs/benchmarks.md, "Blame lookup"). Only for commands that set `exit_at_once`
    because they leave nothing to clean up (no threads, no atexit work, every child
    process waited for)."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        return  # a closed pipe: Python's own exit reports it as usual
    os._exit(status)
