"""`git obversa corpus search|view`: a Markdown corpus, from a directory or a Git tree."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from git_obversa.cli import Failure, add_line_range, count, print_json

SEARCH_EPILOG = """\
Passages are paragraphs and headings of the .md files. A passage that holds the whole
query as a phrase ranks first, then more distinct query words, then more occurrences.
Hidden and invalid names (.private/, _draft.md, names with spaces) and symbolic links
are skipped.

examples:
  git obversa corpus search "battery warranty" --dir docs
  git obversa corpus search "release checklist" --rev main --dir docs --limit 3
  git obversa corpus search retry --dir notes --json

With --rev the corpus is read from that commit's tree in the current repository: no
checkout needed. An index kept in the cache (a directory) or the git dir (--rev) makes
repeated searches fast; --no-index scans every file instead (same hits).
"""

VIEW_EPILOG = """\
examples:
  git obversa corpus view /memories/guide.md --dir docs
  git obversa corpus view guide.md --dir docs --range 3 -1
  git obversa corpus view / --rev HEAD --dir docs --json
"""


def add_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    search = verbs.add_parser(
        "search",
        help="find the passages that match a query",
        description="Find the passages of a Markdown corpus that match QUERY, best first.",
        epilog=SEARCH_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    search.add_argument("query", metavar="QUERY")
    search.add_argument(
        "--limit", type=count, default=20, metavar="N", help="at most N hits (default 20)"
    )
    search.add_argument("--no-index", action="store_true", help="scan every file, no index")
    view = verbs.add_parser(
        "view",
        help="show a corpus file or directory",
        description="Show a file of the corpus (as memory path /memories/...) or a directory.",
        epilog=VIEW_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    view.add_argument("path", metavar="PATH", help="/memories/... or a path inside the corpus")
    add_line_range(view, "--range")
    for verb, run in ((search, run_search), (view, run_view)):
        verb.add_argument("--dir", help="the corpus directory (default: the current one)")
        verb.add_argument("--rev", help="read the corpus from this commit's tree instead")
        verb.add_argument("--json", action="store_true", help="machine-readable output")
        verb.set_defaults(run=run)
    parser.set_defaults(run=lambda args: _usage(parser))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_usage(sys.stderr)
    print("git obversa corpus: choose a verb: search or view", file=sys.stderr)
    return 2


def open_corpus(args: argparse.Namespace, index: bool = True) -> Any:
    from git_obversa.corpus.markdown import open_markdown_corpus

    try:
        if args.rev is not None:
            return open_markdown_corpus(args.dir, repository=os.getcwd(), rev=args.rev, index=index)
        return open_markdown_corpus(args.dir or ".", index=index)
    except (TypeError, ValueError) as error:
        where = f"--rev {args.rev} --dir {args.dir or '/'}" if args.rev else (args.dir or ".")
        raise Failure(f"cannot open the corpus {where}: {error}") from None


def run_search(args: argparse.Namespace) -> int:
    corpus = open_corpus(args, index=not args.no_index)
    try:
        hits = corpus.search(args.query, args.limit)
    except (TypeError, OSError) as error:
        raise Failure(str(error)) from None
    if args.json:
        print_json(hits)
        return 0
    if not hits:
        print(f"no passage matches {args.query!r}", file=sys.stderr)
        return 0
    for hit in hits:
        passage = hit["passage"]
        print(f"{_file_of(args, hit['path'])}:{passage['start_line']}-{passage['end_line']}")
        for line in passage["text"].splitlines():
            print(f"    {line}")
    return 0


def _file_of(args: argparse.Namespace, path: str) -> str:
    """The file a hit's memory path (/memories/REL) stands for, as the user can open it:
    DIR/REL for a directory, REV:DIR/REL (git show's syntax) for a Git tree."""
    relative = path.removeprefix("/memories/")
    directory = (args.dir or "").strip("/") if args.rev is not None else (args.dir or "")
    file = os.path.join(directory, relative) if directory not in ("", ".") else relative
    return f"{args.rev}:{file}" if args.rev is not None else file


def run_view(args: argparse.Namespace) -> int:
    from git_obversa.cli.memory import checked, memory_path

    path = "/memories" if args.path in ("/", "") else memory_path(args.path)
    command: dict[str, Any] = {"command": "view", "path": path}
    if args.range is not None:
        command["view_range"] = list(args.range)
    result = checked(open_corpus(args).memory.execute(command), args.json)
    if args.json:
        return 0
    value = result["value"]
    if value["kind"] == "directory":
        for entry in value["entries"]:
            print(entry["name"] + ("/" if entry["kind"] == "directory" else ""))
    else:
        sys.stdout.write(value["text"])
    return 0
