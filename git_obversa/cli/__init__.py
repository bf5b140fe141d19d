"""`git obversa`: argument parsing and dispatch.

Each command group lives in its own module with `add_arguments(parser)`; that function
registers `run=<function>` on the parser. Only the chosen group's module is imported, so
`git obversa hook ...` starts without loading the memory engine.
"""

from __future__ import annotations

import argparse
import os
import sys

TYPE_CHECKING = False  # `typing` costs every command milliseconds to import
if TYPE_CHECKING:
    from typing import NoReturn

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
    "help": ("", "show the help of a command: git obversa help COMMAND [VERB]"),
}


class Failure(Exception):
    """A handled failure: one line on stderr, and under --json one JSON object on stdout
    too (`{"ok": false, "error": {"code", "message"}}`, or RESULT when the command has a
    fuller one, as a memory result); exit status 1. CODE names the kind for programs."""

    status = 1

    def __init__(self, message: str, code: str = "FAILED", result: dict | None = None) -> None:
        super().__init__(message)
        self.code, self.result = code, result


class UsageError(Failure):
    """The command line asks for something that cannot be: exit status 2, like every
    error argparse finds."""

    status = 2


# Commands that work on the repository of the current directory: when one fails outside
# a repository, that is what it says, in one wording (NOT_A_REPOSITORY).
REPOSITORY_COMMANDS = {"memory", "record", "install", "uninstall", "isolated", "web"}
REPOSITORY_COMMANDS |= {"why", "blame", "log", "mcp"}
NOT_A_REPOSITORY = "not a git repository: {path} (run it inside a repository)"


def whole_number(minimum: int, *, also: int | None = None, maximum: int | None = None):
    """An argparse type for a whole number of MINIMUM or more (and at most MAXIMUM; ALSO
    is one more value allowed, as -1 for "the last line"). A number the option can never
    mean is a usage error (exit 2) found while parsing; what depends on the data (a line
    past the end of a file) stays for the engine to decide."""
    wanted = f"a whole number of {minimum} or more"
    if maximum is not None:
        wanted = f"a whole number from {minimum} to {maximum}"
    if also is not None:
        wanted += f", or {also}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or (
            value != also and (value < minimum or (maximum is not None and value > maximum))
        ):
            raise argparse.ArgumentTypeError(f"{text!r} is not {wanted}")
        return value

    parse.__name__ = wanted  # what argparse would name it in its own messages
    return parse


# What counts and sizes may be: -n, --limit, --max-*.
count = whole_number(1)


class _LineRange(argparse.Action):
    """START END: START a line number, END one at or after it, or -1 (the last line)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        start, end = values
        if start == -1 or (end != -1 and end < start):
            raise argparse.ArgumentError(
                self,
                f"{start} {end} is not a range of lines "
                "(START 1 or more; END from START on, or -1 for the last line)",
            )
        setattr(namespace, self.dest, [start, end])


def add_line_range(parser: argparse.ArgumentParser, *flags: str) -> None:
    """The --range option of the commands that show a file's lines."""
    parser.add_argument(
        *flags,
        nargs=2,
        type=whole_number(1, also=-1),
        action=_LineRange,
        metavar=("START", "END"),
        help="only lines START to END (1-based; END -1 means the last line)",
    )


def print_json(value: object) -> None:
    import json  # only for --json: every command pays for what it imports

    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2) + "\n")


class Parser(argparse.ArgumentParser):
    """argparse, with Git's conventions: a usage error exits 2, as one JSON object on
    stdout when the command line asks for --json; each parser records itself, so a
    usage error found later is reported against the (sub)command's own usage."""

    json_errors = False  # set by main from the command line, before parsing

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.set_defaults(command_parser=self)

    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse builds a formatter on every add_argument, and its own asks
        # `shutil.get_terminal_size` for the width: an import of shutil (with bz2, lzma
        # and fnmatch) that `why` would pay on every call for help it does not print.
        return self.formatter_class(prog=self.prog, width=terminal_columns() - 2)

    def error(self, message: str) -> NoReturn:
        if self.json_errors:
            print_json({"ok": False, "error": {"code": "USAGE", "message": message}})
            sys.exit(2)
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: {message}\n")


def terminal_columns() -> int:
    """The width help is wrapped to, as `shutil.get_terminal_size` finds it: COLUMNS
    when it is a positive number, else the terminal of stdout, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


def build_parser(chosen: str | None, words: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command; with CHOSEN, of that command alone (which is all that
    parsing its arguments needs, and a few milliseconds cheaper). WORDS, the command
    line after CHOSEN, lets a group that has `add_arguments_for` build only the verb
    they name."""
    parser = Parser(
        prog="git obversa",
        description="Keep why a change was made next to the change itself.",
        epilog="`git obversa help COMMAND` (or COMMAND --help) explains one command.",
    )
    from git_obversa import __version__

    parser.add_argument("--version", action="version", version=f"git-obversa {__version__}")
    parser.add_argument(
        "--no-pager", action="store_true", help="never page the output (GIT_PAGER=cat does too)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, text) in COMMANDS.items():
        if chosen is not None and name != chosen:
            continue
        command_parser = sub.add_parser(name, help=text, description=text)
        if name == chosen and name != "help":
            # __import__ rather than importlib.import_module: one module less to load
            group = __import__(f"git_obversa.cli.{module}", fromlist=["add_arguments"])
            if words is not None and hasattr(group, "add_arguments_for"):
                group.add_arguments_for(command_parser, name, words)
            else:
                group.add_arguments(command_parser, name)
        elif name == chosen:
            command_parser.add_argument("topic", nargs="*", metavar="COMMAND")
    return parser


def main(argv: list[str] | None = None) -> int:
    program = argv is None  # run as the git-obversa program, not called in-process
    argv = sys.argv[1:] if argv is None else argv
    Parser.json_errors = "--json" in argv[: argv.index("--") if "--" in argv else None]
    # The command comes first; only options of git obversa itself may come before it.
    first = next((i for i, word in enumerate(argv) if word not in GLOBAL_OPTIONS), len(argv))
    chosen = argv[first] if first < len(argv) and argv[first] in COMMANDS else None
    if chosen == "help":  # `git obversa help [COMMAND [VERB]]` is COMMAND VERB --help
        topic = [word for word in argv[first + 1 :] if not word.startswith("-")]
        if topic and topic[0] not in COMMANDS:
            build_parser("help").error(f"no command {topic[0]!r}; `git obversa -h` lists them")
        return main([*argv[:first], *topic, "--help"])
    parser = build_parser(chosen, argv[first + 1 :] if chosen is not None else None)
    args = parser.parse_args(argv)
    run = getattr(args, "run", None)
    if run is None:
        parser.print_help()
        return 0 if args.command is None and not argv else 2
    from git_obversa.cli import terminal

    try:
        terminal.start(args, args.command)
        status = run(args) or 0
        sys.stdout.flush()  # inside the try: a reader that went away is handled below
    except UsageError as failure:
        args.command_parser.error(str(failure))
    except Failure as failure:
        status = report(args, failure)
    except KeyboardInterrupt:
        status = 130
    except BrokenPipeError:
        # `git obversa ... | head`: the reader has what it wanted. Quiet, like git; point
        # stdout at /dev/null so the interpreter's final flush cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = 141
    finally:
        terminal.finish()  # a pager started for this run shows it all and is waited for
    if program and getattr(args, "exit_at_once", False):
        _exit_at_once(status)
    return status


# Options of `git obversa` itself, which may come before the command.
GLOBAL_OPTIONS = {"--no-pager"}


def report(args: argparse.Namespace, failure: Failure) -> int:
    """Print FAILURE once, in the form the command line asked for; its exit status."""
    message, code, result = str(failure), failure.code, failure.result
    if args.command in REPOSITORY_COMMANDS and not _inside_repository():
        message, code = NOT_A_REPOSITORY.format(path=os.getcwd()), "NOT_A_REPOSITORY"
        result = None
    if getattr(args, "json", False):  # for the program; the line below is for its user
        print_json(result or {"ok": False, "error": {"code": code, "message": message}})
    print(f"git obversa {args.command}: {message}", file=sys.stderr)
    return failure.status


def _inside_repository() -> bool:
    """Asked only once a command failed, so a working command never pays for it."""
    import subprocess

    found = subprocess.run(["git", "rev-parse", "--git-dir"], capture_output=True)
    return found.returncode == 0


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
