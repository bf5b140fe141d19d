"""The argparse parser of `git obversa`: help, usage errors, and every command line the
grammar's quick reading leaves to it (`lean/grammar.py`). Imported only then: argparse
brings `re`, `enum`, `gettext` and `locale` with it."""

from __future__ import annotations

import argparse
import os
import sys

from git_obversa.cli.commands import COMMANDS, NO_PAGER, print_json

TYPE_CHECKING = False  # `typing` costs every command milliseconds to import
if TYPE_CHECKING:
    from typing import NoReturn


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
        # and fnmatch) that a command would pay on every call for help it does not print.
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
    NO_PAGER.add_to(parser)
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


def parse(argv: list[str], chosen: str | None, words: list[str] | None, json_errors: bool):
    """(parser, namespace) of ARGV by argparse; a usage error exits 2 as `Parser.error`
    reports it."""
    Parser.json_errors = json_errors
    parser = build_parser(chosen, words)
    return parser, parser.parse_args(argv)
