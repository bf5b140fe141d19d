"""`git obversa agent-hook`: capture an agent's reasoning from its hook event.

Wired into the agent's own hooks (`git obversa install --claude-code`), it runs before a
Bash tool call that may commit and after every response, and must never get in the
agent's way: any problem is one warning line on stderr and exit 0, with nothing on stdout
(a `PreToolUse` hook's stdout could be taken for a decision).
"""

from __future__ import annotations

import argparse
import os
import sys

EPILOG = """\
Claude Code: `git obversa install --claude-code` writes this into .claude/settings.json
(merged with what is there; `git obversa uninstall --claude-code` takes it out again):

  {"hooks": {
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
        "command": "git obversa agent-hook claude-code", "if": "Bash(git *)"}]}],
    "Stop": [{"hooks": [{"type": "command",
        "command": "git obversa agent-hook claude-code"}]}],
    "SubagentStop": [...the same...], "SessionEnd": [...the same...]}}

Before a git command runs (PreToolUse, Bash), the session's transcript up to that tool
call becomes pending turns of the worktree the session runs in, so a commit the agent
makes inside its response carries that response's reasoning. Stop, SubagentStop and
SessionEnd take what was written since; at Stop the response's last message is taken from
the event when the transcript does not have it yet. Each run reads only what is new.
`git obversa record show` lists the pending turns. Outside a Git worktree it does
nothing. The stage is `git config obversa.stage`, else commit.
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
        for line in capture_claude_code(sys.stdin.read()):
            print(f"git obversa agent-hook: {line}", file=sys.stderr)
    except Exception as error:  # never fail the agent: warn and carry on
        detail = str(error).splitlines()[0] if str(error) else type(error).__name__
        print(f"git obversa agent-hook: warning: reasoning not captured: {detail}", file=sys.stderr)
    return 0


def capture_claude_code(event_text: str) -> list[str]:
    """Capture what the hook event on stdin points at; returns the lines to tell the user."""
    from git_obversa import git
    from git_obversa.agents.claude_code import hook_event, ingest_claude_code, subagent_transcript
    from git_obversa.cli.record import configured_stage, hooks_missing_line, malformed_line
    from git_obversa.record.turns import TurnStore

    event = hook_event(event_text)
    if not event["transcript_path"]:
        return []  # a session served without a transcript file: nothing to read
    # Older Claude Code versions send Stop events without cwd; hooks run in the project.
    cwd = event.get("cwd") or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    try:
        store = TurnStore.for_worktree(cwd)
    except git.GitError:
        return []  # not a Git worktree (or no such directory): nothing to capture for
    stage = configured_stage(cwd)
    name = event.get("hook_event_name")
    transcript = os.path.expanduser(event["transcript_path"])
    # Only Stop's message is the session's own; SubagentStop's is the sub-agent's.
    said = event.get("last_assistant_message") if name == "Stop" else None
    results = [ingest_claude_code(transcript, store, stage, last_assistant_message=said)]
    agent_id, session_id = event.get("agent_id"), event.get("session_id")
    if name == "PreToolUse" and isinstance(agent_id, str) and isinstance(session_id, str):
        # A sub-agent is about to run the command: its own transcript holds its reasoning.
        own = subagent_transcript(transcript, session_id, agent_id)
        if own.is_file():
            results.append(ingest_claude_code(own, store, stage, sidechain=True))
    lines = [malformed_line(result) for result in results if result.malformed]
    if any(result.turns for result in results):
        lines.extend(hooks_missing_line(cwd))
    return lines
