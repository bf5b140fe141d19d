"""`git obversa why`, `blame` and `log`: from lines and history to recorded reasoning.

Each call is a fresh Python process, and `git obversa why` is held to the speed of
plain `git blame`: its arguments are a `Grammar`, read without argparse (and `re`) on the
usual command lines; it imports nothing else up front, works on the plain data of
`git_obversa.lookup.blame` (the dataclasses of `git_obversa.lookup.why` would cost the
import of `dataclasses`), and writes its output in one piece.
"""

import sys

from git_obversa.cli import Failure, count, later, print_json
from git_obversa.cli.terminal import COLOR_OPTIONS, paint
from git_obversa.lean.grammar import Argument, Grammar

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

REASON_COLUMN = 40
AUTHOR_COLUMN = 20
AGENT_COLUMN = 16

WHY_EPILOG = """\
examples:
  git obversa why src/client.py              every commit that owns a line of the file
  git obversa why src/client.py:42           the commit behind line 42
  git obversa why src/client.py:40-60 -M -C  lines 40 to 60, following moves and copies
  git obversa why README.md --rev v1.2 --json

Lines are grouped by the commit that last changed them (git blame), in line order. For
each commit: its sha, author, date, subject, the lines it owns, and the reasoning its
message records (the "Why:" block the commit hook writes, or a "## Why" section). A
commit without recorded reasoning says so and shows its body. blame.ignoreRevsFile and
the rest of your blame configuration apply. A range running past the end of the file
stops at its last line. Blames are kept in .git/obversa/blame, so the next lookup (or the
one after a commit) costs a fraction of git blame; --no-cache runs git blame afresh.
"""

BLAME_EPILOG = """\
examples:
  git obversa blame src/client.py
  git obversa blame src/client.py:40-60 --json

Like git blame, with one more column: the first line of the reasoning recorded by the
commit that last changed each line ("-" when it recorded none). Where commits carry
attribution notes (Git AI, Agent Trace), one more: the agent that wrote the line ("-"
when the notes name none).
"""

LOG_EPILOG = """\
examples:
  git obversa log                    every commit that records reasoning
  git obversa log -n 5 src/          the five newest that touched src/
  git obversa log --rev main --json
"""


JSON = Argument("--json", action="store_true", help="print JSON")

LOG = [
    Argument("paths", nargs="*", metavar="PATH", help="only commits touching these"),
    Argument("-n", "--max-count", type=count, metavar="N", help="show at most N"),
    Argument("--rev", default="HEAD", help="start from REV (default: HEAD)"),
    JSON,
    *COLOR_OPTIONS,
]

LINES = [
    Argument(
        "target",
        metavar="PATH[:LINE[-END]]",
        help="a file, optionally one line or a range of lines (the whole file by default)",
    ),
    Argument(
        "--rev", help="blame the file as of REV (default: the working tree, as git blame does)"
    ),
    Argument("-M", dest="moves", action="store_true", help="follow lines moved"),
    Argument(
        "-C",
        dest="copies",
        action="count",
        default=0,
        help="follow lines copied from other files (repeat, up to 3 times, to look harder)",
    ),
    Argument(
        "--no-cache",
        dest="cache",
        action="store_false",
        help="run git blame afresh instead of using (and filling) the blame cache",
    ),
    JSON,
    *COLOR_OPTIONS,
]


FULL = Argument(
    "--full",
    action="store_true",
    help="also print each commit's whole kept record: every turn captured for it",
)


def _grammars() -> dict[str, Grammar]:
    # Every process of these commands exits as soon as its output is flushed.
    once = {"exit_at_once": True, "paged": True}
    return {
        "why": Grammar([*LINES, FULL], run=run_why, **once),
        "blame": Grammar(LINES, run=run_blame, **once),
        "log": Grammar(LOG, run=run_log, **once),
    }


EPILOGS = {"why": WHY_EPILOG, "blame": BLAME_EPILOG, "log": LOG_EPILOG}


def declared(name: str, words: list[str]) -> tuple[Grammar, list[str], dict]:
    """The grammar of command NAME, the words it reads (all of them), and no more values."""
    return GRAMMARS[name], words, {}


def add_arguments(parser: "argparse.ArgumentParser", name: str) -> None:
    import argparse

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOGS[name]
    GRAMMARS[name].add_to(parser)


def parse_target(args: "argparse.Namespace", target: str) -> tuple[str, int | None, int | None]:
    """PATH[:LINE[-END]] (or LINE,END) as (path, start, end); a plain PATH has no range.

    The last colon counts, so a path with colons in it still takes a range.
    """
    path, _, spec = target.rpartition(":")
    start_text, dash, end_text = spec.replace(",", "-", 1).partition("-")
    if not (path and start_text.isdecimal() and (not dash or end_text.isdecimal())):
        return target, None, None
    start = int(start_text)
    end = int(end_text) if dash else start
    if start < 1 or end < start:
        args.command_parser.error(
            f"bad line range in {target!r}: lines count from 1 and END >= LINE"
        )
    return path, start, end


def _lookup(
    args: "argparse.Namespace",
    lines: list[tuple[int, str, str]] | None = None,
    prepare: "Callable[[dict], object] | None" = None,
) -> tuple[str, dict[str, dict]]:
    """(path, the commits owning its lines) for the target on the command line, each with
    who wrote its lines (`attribution.who.attach`); with LINES, each line goes into it as
    `blame.lookup` puts it; PREPARE as for `blame.lookup`."""
    from git_obversa.attribution import who
    from git_obversa.lookup import blame

    path, start, end = parse_target(args, args.target)
    if args.copies > 3:
        args.command_parser.error("-C can be given at most 3 times")
    origins = who.wanted(".")
    try:
        commits = blame.lookup(
            ".",
            path,
            start,
            end,
            args.rev,
            moves=args.moves,
            copies=args.copies,
            lines=lines,
            cache=args.cache,
            prepare=prepare,
            keep=later,  # a blame computed afresh is kept once the answer is out
            origins=origins,
        )
    except blame.BlameError as error:
        raise Failure(str(error)) from None
    who.attach(commits, origins, ".")
    return path, commits


def run_why(args: "argparse.Namespace") -> int:
    # Each commit's description is laid out as soon as the engine has it (while a fresh
    # blame still runs), not after: a whole file's `why` describes a thousand commits.
    described: dict[str, str] = {}

    def prepare(commit: dict) -> None:
        described[commit["commit"]] = _describe(commit)

    path, found = _lookup(args, prepare=None if args.json else prepare)
    commits = list(found.values())
    from git_obversa.attribution.who import said

    if args.full:
        from git_obversa.lookup.why import kept_turns

        kept = kept_turns(".", [(commit["commit"], commit["body"]) for commit in commits])
        for commit in commits:
            commit["record"] = kept[commit["commit"]]
    if args.json:
        print_json({"path": path, "rev": args.rev, "commits": commits})
        return 0
    if not commits:
        sys.stdout.write(f"{path} has no lines to blame\n")
        return 0
    moved = _moved_lines(args, path, commits)
    blocks = []
    for commit in commits:
        owned = commit["ranges"]
        where = f"{_lines(owned)} of {', '.join(commit['paths'])}"
        if commit["commit"] in moved:  # another path then: say where the lines were
            where = f"{_lines(owned)}; {moved[commit['commit']]} in this commit"
        blocks.append(
            paint(f"commit {commit['commit']}", "commit")
            + f" ({where})\n"
            + "".join(f"Agent:  {text}\n" for text in said(commit))
            + (described.get(commit["commit"]) or _describe(commit))
            + (_full(commit["record"]) if args.full else "")
        )
    sys.stdout.write("\n\n".join(blocks) + "\n")
    return 0


def _lines(owned: list[list[int]]) -> str:
    """`line 4`, `lines 4-9` or `lines 4-9, 12` for [first, last] ranges."""
    if len(owned) == 1:  # most commits of a whole file: no generator to run
        first, last = owned[0]
        return f"line {first}" if first == last else f"lines {first}-{last}"
    return "lines " + ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in owned)


def _moved_lines(args: "argparse.Namespace", path: str, commits: list[dict]) -> dict[str, str]:
    """`lines 60-62 of OLD/PATH` for each commit in which the file had another path."""
    from git_obversa.lookup import blame

    try:
        moved = blame.lines_in_commits(
            ".", path, commits, args.rev, moves=args.moves, copies=args.copies
        )
    except (blame.BlameError, ValueError):
        return {}  # the answer stands without it
    paths = {commit["commit"]: ", ".join(commit["paths"]) for commit in commits}
    return {sha: f"{_lines(runs)} of {paths[sha]}" for sha, runs in moved.items()}


def _full(record: dict) -> str:
    """A commit's kept RECORD (`lookup.why.kept_turns`) below its description."""
    from git_obversa.cli.record import format_record

    if not record["ids"]:
        return "\n\n    (no kept record: the message names none)"
    text = format_record(record["turns"]) if record["turns"] else ""
    missing = "".join(
        f"Record {record_id} is not here: `git obversa record sync` fetches it.\n"
        for record_id in record["missing"]
    )
    return (
        "\n\n    "
        + paint("Kept record:", "heading")
        + "\n"
        + _indent((text + missing).rstrip("\n"))
    )


def _describe(commit: dict) -> str:
    """Author, date, subject and reasoning, laid out like `git log`."""
    # One string built by concatenation: a whole file's `why` describes a thousand commits.
    head = (
        f"Author: {commit['author']} <{commit['email']}>\n"
        f"Date:   {commit['date'].replace('T', ' ')}\n\n{_indent(commit['subject'])}\n\n"
    )
    if commit["reasoning"] is not None:
        return f"{head}    {paint('Why:', 'heading')}\n{_indent(commit['reasoning'])}"
    if commit["body"]:
        return (
            f"{head}    (no recorded reasoning; the commit body follows)\n{_indent(commit['body'])}"
        )
    return f"{head}    (no recorded reasoning, and the message has no body)"


def _indent(text: str) -> str:
    """TEXT indented by four spaces, its empty lines left empty."""
    if text and "\n\n" not in text and text[0] != "\n" and text[-1] != "\n":
        return "    " + text.replace("\n", "\n    ")  # no empty line: the usual
    return "\n".join("    " + line if line else "" for line in text.split("\n"))


def run_blame(args: "argparse.Namespace") -> int:
    lines: list[tuple[int, str, str]] = []
    path, commits = _lookup(args, lines)
    if args.json:
        print_json(
            {
                "path": path,
                "rev": args.rev,
                "lines": [
                    {"line": number, "commit": sha, "text": text} for number, sha, text in lines
                ],
                "commits": list(commits.values()),
            }
        )
        return 0
    author_width = min(AUTHOR_COLUMN, max((len(c["author"]) for c in commits.values()), default=0))
    number_width = len(str(max((number for number, _, _ in lines), default=0)))
    # Everything before the line number is the same for every line of a commit.
    prefixes = {
        sha: f"{paint(sha[:8], 'commit')} ({_fit(commit['author'], author_width)} "
        f"{commit['date'][:10]} {_reason_column(commit)} "
        for sha, commit in commits.items()
    }
    from git_obversa.attribution.who import writers

    wrote = writers(commits)
    if wrote is None:
        body = "".join(
            f"{prefixes[sha]}{number:>{number_width}}) {text}\n" for number, sha, text in lines
        )
    else:  # who wrote each line, in a column before its number
        width = min(AGENT_COLUMN, max(map(len, wrote.values()), default=1))
        body = "".join(
            f"{prefixes[sha]}{_fit(wrote.get(number, '-'), width)} {number:>{number_width}}) "
            f"{text}\n"
            for number, sha, text in lines
        )
    sys.stdout.write(body)
    return 0


def _reason_column(commit: dict) -> str:
    return paint(_fit(_first_line(commit["reasoning"]), REASON_COLUMN), "reason")


def _first_line(reasoning: str | None) -> str:
    if reasoning is None:
        return "-"
    return reasoning.split("\n", 1)[0]


def _fit(text: str, width: int) -> str:
    """TEXT cut or padded to WIDTH columns."""
    if len(text) > width:
        return text[: width - 1] + "…"
    return text.ljust(width)


def run_log(args: "argparse.Namespace") -> int:
    from git_obversa.lookup import blame

    try:
        commits = blame.reasoned_commits(".", args.paths, args.rev, args.max_count)
    except blame.BlameError as error:
        raise Failure(str(error)) from None
    if args.json:
        print_json({"rev": args.rev, "paths": args.paths, "commits": commits})
        return 0
    if not commits:
        sys.stdout.write(
            "no commit here records reasoning; `git obversa install` adds the hook that "
            "records it in the next commits\n"
        )
        return 0
    blocks = [
        f"{paint('commit ' + commit['commit'], 'commit')}\n{_describe(commit)}"
        for commit in commits
    ]
    sys.stdout.write("\n\n".join(blocks) + "\n")
    return 0


GRAMMARS = _grammars()  # here: the run functions above are what they set
