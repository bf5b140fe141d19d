"""The command table and what both readers of a command line share (`cli/__init__.py`'s
quick one and argparse's in `cli/parser.py`): the options of `git obversa` itself, and
the JSON every command prints."""

import sys

from git_obversa.lean.grammar import Argument

# name -> (module, one-line help). The order is the order of `git obversa --help`.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("demo", "make a throwaway repository and show what git-obversa does"),
    "memory": ("memory", "read and write memory files kept in private Git refs"),
    "record": ("record", "capture the reasoning that goes into the next commit"),
    "agent-hook": ("agent_hook", "capture reasoning from an agent's hook event (stdin)"),
    "agent-context": ("agent_context", "tell an agent the reasons behind lines it edits (stdin)"),
    "hook": ("hook", "run a Git hook (called by the installed hook scripts)"),
    "install": ("install", "install the commit hooks into this repository"),
    "uninstall": ("install", "remove the commit hooks and restore what was there"),
    "doctor": ("doctor", "check that agents' reasoning reaches this repository's commits"),
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
    "help": ("", "show the help of a command: git obversa help COMMAND [VERB]"),
}

# The one option of `git obversa` itself that may come before the command (besides
# --version and --help, which argparse answers).
NO_PAGER = Argument(
    "--no-pager", action="store_true", help="never page the output (GIT_PAGER=cat does too)"
)


def print_json(value: object) -> None:
    """VALUE as `json.dumps(value, ensure_ascii=False, indent=2)` writes it, and a newline
    (written without importing json, which imports `re`: see lean/jsonscan.py)."""
    from git_obversa.lean import jsonscan

    sys.stdout.write(jsonscan.dumps(value) + "\n")
