"""`git obversa doctor`: say where captured reasoning would go nowhere, and what fixes it."""

from __future__ import annotations

import argparse
import time

from git_obversa.cli import Failure, print_json

EPILOG = """\
Checks this repository and each agent set up in it (git obversa install --AGENT):
  commit hooks       installed here (else no commit carries reasoning)
  agent hooks        in the agent's settings, and current
  approved (Codex)   Codex runs a project's hooks only after /hooks approves them,
                     and only in a trusted project
  loaded (Gemini)    Gemini CLI reads a project's settings only in a trusted folder
  mcp server         `git obversa mcp` answers an MCP client
  last capture       when the agent's hook last took its reasoning
One line per problem, with the command or click that fixes it. Exit status 1 when
there is a problem. --json prints the whole report.

example:
  git obversa doctor
"""


def add_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    parser.description = "Check that agents' reasoning reaches this repository's commits."
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--no-mcp", action="store_true", help="do not start the MCP server to check it"
    )
    parser.set_defaults(run=run)


def _ago(stamp: float | None) -> str:
    if stamp is None:
        return "never"
    seconds = max(0, int(time.time() - stamp))
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = seconds // size
            return f"{count} {unit}{'s' if count > 1 else ''} ago"
    return "just now"


def run(args: argparse.Namespace) -> int:
    from git_obversa.agents.doctor import diagnose
    from git_obversa.repo import git

    try:
        report = diagnose(mcp=not args.no_mcp)
    except git.GitError as error:
        raise Failure(f"{error} (run this inside a Git repository)") from error
    if args.json:
        print_json(report)
        return 1 if report["problems"] else 0
    hooks = report["commit_hooks"]
    print(f"commit hooks: {hooks['detail']}")
    if not hooks["ok"]:
        print(f"  problem: fix with `{hooks['fix']}`")
    for agent in report["agents"]:
        if not agent["set_up"]:
            print(f"{agent['agent']}: not set up")
            continue
        print(f"{agent['agent']}: last capture {_ago(agent['last_capture'])}")
        for check in agent["checks"]:
            if not check["ok"]:
                print(f"  problem: {check['detail']}; fix: {check['fix']}")
    count = report["problems"]
    print("no problems" if not count else f"{count} problem{'s' if count > 1 else ''}")
    return 1 if count else 0
