"""`git obversa`: argument parsing and dispatch.

Each command group lives in its own module with `add_arguments(parser)`; that function
registers `run=<function>` on the parser. Only the chosen group's module is imported, so
`git obversa hook ...` starts without loading the memory engine. A group whose commands
are called once per action (`memory`, `why`) also offers `declared(name, words)`: the
`Grammar` its parser is built from, which reads the usual command lines without
importing argparse (`lean/grammar.py`); anything else goes to argparse (`cli/parser.py`).
"""

import os
import sys

from git_obversa.cli.commands import COMMANDS, NO_PAGER
from git_obversa.cli.commands import print_json as print_json  # every group prints with it
from git_obversa.lean.grammar import Argument, Grammar

TYPE_CHECKING = False  # `typing` costs every command milliseconds to import
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable


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
            import argparse  # only to say what was wrong: argparse reads this line

            raise argparse.ArgumentTypeError(f"{text!r} is not {wanted}")
        return value

    parse.__name__ = wanted  # what argparse would name it in its own messages
    return parse


# What counts and sizes may be: -n, --limit, --max-*.
count = whole_number(1)


def _line_range_error(values: list[int]) -> str | None:
    start, end = values
    if start == -1 or (end != -1 and end < start):
        return (
            f"{start} {end} is not a range of lines "
            "(START 1 or more; END from START on, or -1 for the last line)"
        )
    return None


def line_range(*flags: str) -> Argument:
    """The --range option of the commands that show a file's lines: START END, START a
    line number, END one at or after it, or -1 (the last line)."""
    return Argument(
        *flags,
        nargs=2,
        type=whole_number(1, also=-1),
        check=_line_range_error,
        metavar=("START", "END"),
        help="only lines START to END (1-based; END -1 means the last line)",
    )


def add_line_range(parser: "argparse.ArgumentParser", *flags: str) -> None:
    line_range(*flags).add_to(parser)


class Arguments:
    """A command line as argparse's namespace would hold it, read by a `Grammar`. The
    argparse parser of the (sub)command, which a usage error found later is reported
    against, is built only if asked for."""

    def __init__(self, argv: list[str], json_errors: bool, values: dict) -> None:
        self.__dict__.update(values)
        self.__line = argv, json_errors

    @property
    def command_parser(self) -> "argparse.ArgumentParser":
        from git_obversa.cli import parser

        argv, json_errors = self.__line
        words = argv[argv.index(self.command) + 1 :]
        return parser.parse(argv, self.command, words, json_errors)[1].command_parser


def main(argv: list[str] | None = None) -> int:
    program = argv is None  # run as the git-obversa program, not called in-process
    _LATER.clear()  # what a call that raised left undone is not this call's to do
    argv = sys.argv[1:] if argv is None else argv
    json_errors = "--json" in argv[: argv.index("--") if "--" in argv else None]
    first, chosen = command_position(argv)
    if chosen == "help":  # `git obversa help [COMMAND [VERB]]` is COMMAND VERB --help
        topic = [word for word in argv[first + 1 :] if not word.startswith("-")]
        if topic and topic[0] not in COMMANDS:
            from git_obversa.cli.parser import Parser, build_parser

            Parser.json_errors = json_errors
            build_parser("help").error(f"no command {topic[0]!r}; `git obversa -h` lists them")
        return main([*argv[:first], *topic, "--help"])
    values = read_declared(argv, first, chosen)
    if values is not None:
        args: argparse.Namespace | Arguments = Arguments(argv, json_errors, values)
    else:
        from git_obversa.cli import parser

        words = argv[first + 1 :] if chosen is not None else None
        command_parser, args = parser.parse(argv, chosen, words, json_errors)
        if getattr(args, "run", None) is None:
            command_parser.print_help()
            return 0 if args.command is None and not argv else 2
    run = args.run
    if program and getattr(args, "exit_at_once", False):
        import gc

        # The process ends with os._exit, which frees nothing: looking for reference
        # cycles while it imports and works would be work for nothing (3 % of a view).
        gc.disable()
    # Pager and colour, for the commands that print pages (the only ones that colour):
    # a one-shot memory command loads neither.
    terminal = None
    if getattr(args, "paged", False):
        from git_obversa.cli import terminal
    try:
        if terminal is not None:
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
        if terminal is not None:
            terminal.finish()  # a pager started for this run shows it all, waited for
    if program and getattr(args, "exit_at_once", False):
        _exit_at_once(status)
    while _LATER:
        _LATER.pop(0)()
    return status


# Work the output does not wait for (see `later`), in the order it was handed over.
_LATER: "list[Callable[[], object]]" = []


def later(action: "Callable[[], object]") -> None:
    """Do ACTION once the command's output is out. A program that ends at once
    (`exit_at_once`) does not wait for it: a child process of its own does it after the
    command has exited; called in process, `main` does it before it returns. For work
    whose result the output does not need, such as keeping a blame just computed."""
    _LATER.append(action)


def command_position(argv: list[str]) -> tuple[int, str | None]:
    """(index, name) of the command on ARGV; the name is None when the word there names
    none. The command comes first: only options of git obversa itself may precede it."""
    first = next((i for i, word in enumerate(argv) if word not in GLOBAL_OPTIONS), len(argv))
    return first, argv[first] if first < len(argv) and argv[first] in COMMANDS else None


def read_declared(argv: list[str], first: int, chosen: str | None) -> dict | None:
    """ARGV read by the grammar its command declares (the values argparse's namespace
    would hold, but its parser), or None: argparse's to parse (a command without a
    grammar, or a line the grammar leaves to argparse)."""
    if chosen is None or chosen == "help":
        return None
    group = __import__(f"git_obversa.cli.{COMMANDS[chosen][0]}", fromlist=["declared"])
    declared = getattr(group, "declared", None)
    found = declared(chosen, argv[first + 1 :]) if declared is not None else None
    if found is None:
        return None
    grammar, words, fixed = found
    own, values = GLOBAL.read(argv[:first]), grammar.read(words)
    if own is None or values is None:
        return None
    return {**own, "command": chosen, **fixed, **values}


# Options of `git obversa` itself, which may come before the command.
GLOBAL = Grammar([NO_PAGER])
GLOBAL_OPTIONS = set(NO_PAGER.flags)


def report(args: "argparse.Namespace", failure: Failure) -> int:
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
    if _LATER:
        _detached(_LATER)
    os._exit(status)


def _detached(actions: "list[Callable[[], object]]") -> None:
    """Do ACTIONS in a child process this one does not wait for (or here, when no child
    can be made). The child holds none of the command's input and output, so a reader
    of the output sees its end when the command exits."""
    try:
        pid = os.fork()
    except (AttributeError, OSError):  # no fork on this system, or no room for a process
        pid = -1
    if pid > 0:
        return
    if pid == 0:
        null = os.open(os.devnull, os.O_RDWR)
        for descriptor in (0, 1, 2):
            os.dup2(null, descriptor)
    try:
        for action in actions:
            action()
    finally:
        if pid == 0:
            os._exit(0)
