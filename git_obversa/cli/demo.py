"""`git obversa demo`."""

from __future__ import annotations

import argparse

from git_obversa.cli import Failure


def add_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    parser.description = (
        "Make a throwaway repository and walk through git-obversa: memory in a private "
        "ref, reasoning captured and written into a commit by the hook, and `why` on a "
        "changed line. Every step prints the command it runs."
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the demo repository and print its path"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from git_obversa.cli import demo_script as demo

    problem = demo.missing_requirement()
    if problem:
        raise Failure(problem)
    try:
        demo.run_demo(keep=args.keep)
    except demo.DemoFailed as error:
        raise Failure(str(error)) from error
    return 0
