"""The quick reading of a command line (lean/grammar.py) against argparse's, which is built
from the same declaration: wherever the quick one reads a line, it reads what argparse
reads; where it cannot be sure, it leaves the line to argparse."""

from __future__ import annotations

import contextlib
import io
import itertools
import random

import pytest

from git_obversa.cli import command_position, read_declared
from git_obversa.cli.parser import parse

# Words a command line of each command is made of: the values and options of its
# grammar, spelled right and wrong, and the words argparse treats specially.
TRICKY = ["", "-", "--", "-1", "-0", "- item", "-h", "--help", "--no-pager", "--bogus", "-x"]
WORDS = {
    "why": [
        *("small.md", "a.md:3", "a.md:2-4", "HEAD", "x y", "--rev", "--rev=HEAD~1", "--rev="),
        *("-M", "-C", "-CC", "-MC", "--no-cache", "--no-cache=1", "--json", "--js", "--json=1"),
        *("--color", "--color=never", "never", "--no-color", "--no-c", "-n", "2"),
    ],
    "log": ["-n", "--max-count", "2", "0", "x", "--max-count=3", "--rev", "main", "a.md", "b/"]
    + ["--json", "--no-color", "--color=always"],
    "memory view": ["a.md", "/memories/x", "-r", "--range", "1", "2", "0", "x", "-r=1"]
    + ["--scope", "s", "--scope=", "--scope=s", "--limits", '{"max_files": 2}', "nope"]
    + ["--limits={}", "--json", "--jso", "--range=1"],
    "memory create": ["a.md", "text", "two words", "--scope", "s", "--json", "--limits"]
    + ['{"max_files": 2}', "--scope=t", "-r", "1"],
    "memory str-replace": ["a.md", "old", "new", "- old", "- new", "--scope", "s", "--json"]
    + ["--scope=-x", "--limits=[]", "--limits"],
    "memory insert": ["a.md", "0", "3", "-1", "x", "text", "--json", "--scope", "s"],
    "memory log": ["-n", "1", "0", "--max-count", "--max-count=2", "--json", "--scope", "s"],
    "memory rename": ["a.md", "b.md", "--json", "--scope", "s"],
}


def argparse_reading(argv: list[str]) -> dict | None:
    """What argparse's namespace holds for ARGV (None: a usage error), minus the parser."""
    first, chosen = command_position(argv)
    quiet = io.StringIO()
    try:
        with contextlib.redirect_stderr(quiet), contextlib.redirect_stdout(quiet):
            _, namespace = parse(argv, chosen, argv[first + 1 :], False)
    except SystemExit:
        return None
    values = vars(namespace)
    values.pop("command_parser")
    return values


def quick_reading(argv: list[str]) -> dict | None:
    return read_declared(argv, *command_position(argv))


def command_lines(command: str, count: int) -> list[list[str]]:
    """Every line of up to two words from the pool, and COUNT random ones of three to six."""
    head = command.split()
    pool = WORDS[command] + TRICKY
    lines = [head + list(words) for n in range(3) for words in itertools.product(pool, repeat=n)]
    rng = random.Random(command)
    for _ in range(count):
        lines.append(head + rng.choices(pool, k=rng.randint(3, 6)))
    return lines


@pytest.mark.parametrize("command", sorted(WORDS))
def test_where_the_quick_reading_reads_a_line_argparse_reads_the_same(command):
    read = 0
    for argv in command_lines(command, 400):
        quick = quick_reading(argv)
        if quick is None:
            continue
        read += 1
        assert quick == argparse_reading(argv), argv
    assert read >= 10  # the quick reading did take part


@pytest.mark.parametrize(
    "argv",
    [
        ["why", "small.md"],
        ["--no-pager", "why", "small.md:3-5", "--json"],
        ["why", "--rev", "v1.2", "README.md", "-M", "-C", "-C", "--no-cache", "--no-color"],
        ["blame", "src/client.py:40-60", "--json"],
        ["log", "-n", "5", "src/"],
        ["memory", "view"],
        ["memory", "view", "/memories/notes/plan.md", "-r", "2", "-1", "--json"],
        ["memory", "view", "--scope", "agent-1", "plan.md", "--limits", '{"max_files": 512}'],
        ["memory", "create", "notes/plan.md", "first step"],
        ["memory", "create", "notes/plan.md", "-"],
        ["memory", "str-replace", "notes/plan.md", "- first step", "- second step"],
        ["memory", "insert", "notes/plan.md", "0", "a new first line"],
        ["memory", "delete", "notes/plan.md", "--scope=team"],
        ["memory", "rename", "notes/plan.md", "notes/done.md"],
        ["memory", "exec", "--scope", "agent-1"],
        ["memory", "log", "-n", "5"],
    ],
)
def test_the_usual_command_lines_are_read_without_argparse(argv):
    quick = quick_reading(argv)
    assert quick is not None
    assert quick == argparse_reading(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["why", "-h"],  # help is argparse's to print
        ["why", "small.md", "--rev"],  # a missing value: argparse's error
        ["why", "small.md", "--js"],  # an abbreviation argparse accepts
        ["why", "--", "-odd-name.md"],
        ["memory", "view", "a.md", "-r", "3", "1"],  # the range check refuses it
        ["memory", "view", "--limits", "[]"],  # the type function refuses it
        ["memory", "create", "a.md", "--json", "text"],  # positionals around an option
        ["memory", "push", "origin"],  # a verb without a grammar
        ["memory"],
        ["corpus", "search", "x"],  # a command without a grammar
    ],
)
def test_what_the_quick_reading_is_unsure_of_goes_to_argparse(argv):
    assert quick_reading(argv) is None
