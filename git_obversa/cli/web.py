"""`git obversa web`: serve the local read-only page and print its URL."""

from __future__ import annotations

import argparse
import sys

from git_obversa.cli import Failure, whole_number

EPILOG = """\
examples:
  git obversa web                 serve on a free port; open the printed URL
  git obversa web --open          and open it in the default browser
  git obversa web --port 8123 --rev v1.2

The page shows the repository's files at a revision; a file opens with a blame gutter,
and a line's commit shows its recorded reasoning (its "Why:" block) on hover or click.
It also lists the log of commits that record reasoning, the memory scopes and their
files, and searches the repository's Markdown files. It listens on 127.0.0.1 only,
never writes to the repository, and refuses requests made for another host or from
another site's page. The URL is the first line printed; Ctrl-C stops the server.
"""


def add_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument(
        "--port",
        type=whole_number(0, maximum=65535),
        default=0,
        metavar="N",
        help="listen on port N (default: a free one)",
    )
    parser.add_argument("--open", action="store_true", help="open the page in a browser")
    parser.add_argument("--rev", default="HEAD", help="the revision shown first (default: HEAD)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from git_obversa.repo import git

    try:
        repository = git.output(["rev-parse", "--show-toplevel"])
    except git.GitError:
        raise Failure("not a git repository (run it inside one)") from None
    from git_obversa.web.server import WebServer

    try:
        server = WebServer(repository, args.port, args.rev)
    except OSError as error:
        raise Failure(f"cannot listen on 127.0.0.1:{args.port}: {error.strerror}") from None
    # The URL first and flushed at once: a script or test reads it to find the server.
    print(server.url, flush=True)
    print(f"serving {repository} read-only; Ctrl-C stops", file=sys.stderr, flush=True)
    if args.open:
        import webbrowser

        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
