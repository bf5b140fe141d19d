"""`git obversa agent-hook`: capture an agent's reasoning from its hook event.

Wired into the agent's own hooks (Claude Code: `Stop`), it runs after every agent turn and
must never get in the agent's way: any problem is one warning line on stderr and exit 0.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

EPILOG = """\
Claude Code: add to .claude/settings.json (or ~/.claude/settings.json)

  {"hooks": {"Stop": [{"hooks": [
      {"type": "command", "command": "git obversa agent-hook claude-code"}]}]}}

After each turn the assistant's new text and thinking become pending turns of the
worktree the session runs in (`git obversa record show`); the next commit there carries
them. Outside a Git worktree it does nothing. The stage is `git config obversa.stage`,
else commit.
"""


def add_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    parser.description = (
        "Read an agent's hook event (JSON) from stdin and capture the reasoning of its "
        "session into the worktree it runs in. Never fails the agent."
    )
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("agent", choices=["claude-code"], help="which agent sent the event")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        capture_claude_code(sys.stdin.read())
    except Exception as error:  # never fail the agent: warn and carry on
        detail = str(error).splitlines()[0] if str(error) else type(error).__name__
        print(f"git obversa agent-hook: warning: reasoning not captured: {detail}", file=sys.stderr)
    return 0


def capture_claude_code(event_text: str) -> None:
    from git_obversa import git
    from git_obversa.agents.claude_code import ingest_claude_code
    from git_obversa.cli.record import configured_stage
    from git_obversa.record.turns import TurnStore

    try:
        event = json.loads(event_text)
    except json.JSONDecodeError as error:
        raise ValueError(f"the hook event on stdin is not JSON ({error.msg})") from error
    if not isinstance(event, dict) or not isinstance(event.get("transcript_path"), str):
        raise ValueError("the hook event on stdin has no transcript_path")
    # Older Claude Code versions send Stop events without cwd; hooks run in the project.
    cwd = event.get("cwd") or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    try:
        store = TurnStore.for_worktree(cwd)
    except git.GitError:
        return  # not a Git worktree (or no such directory): nothing to capture for
    ingest_claude_code(os.path.expanduser(event["transcript_path"]), store, configured_stage(cwd))
