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

Codex (`git obversa install --codex`, .codex/hooks.json) and Gemini CLI (`install
--gemini`, .gemini/settings.json) are wired the same way: `agent-hook codex` at Stop and
PreToolUse (Bash), `agent-hook gemini` at AfterAgent and BeforeTool (run_shell_command).
They read the Codex rollout / Gemini chat recording the event names. See docs/agents.md.

Claude Code: before a git command runs (PreToolUse, Bash), the session's transcript up to that tool
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
    parser.add_argument("agent", choices=list(AGENTS), help="which agent sent the event")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        for line in AGENTS[args.agent](sys.stdin.read()):
            print(f"git obversa agent-hook: {line}", file=sys.stderr)
    except Exception as error:  # never fail the agent: warn and carry on
        detail = str(error).splitlines()[0] if str(error) else type(error).__name__
        print(f"git obversa agent-hook: warning: reasoning not captured: {detail}", file=sys.stderr)
    return 0


def capture_claude_code(event_text: str) -> list[str]:
    """Capture what the hook event on stdin points at; returns the lines to tell the user."""
    from git_obversa.agents.claude_code import hook_event, ingest_claude_code, subagent_transcript
    from git_obversa.cli.record import after_capture, configured_stage, malformed_line
    from git_obversa.record.turns import TurnStore
    from git_obversa.repo import git

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
        lines.extend(after_capture(store, cwd))
    return lines


def capture_codex(event_text: str) -> list[str]:
    """Capture from a Codex hook event (Stop, PreToolUse) and the rollout it names."""
    from git_obversa.agents.codex import ingest_codex

    def ingest(event: dict, transcript: str, store, stage: str):
        said = (
            event.get("last_assistant_message") if event.get("hook_event_name") == "Stop" else None
        )
        return ingest_codex(transcript, store, stage, last_assistant_message=said)

    return _capture_by_content(event_text, ingest)


def capture_gemini(event_text: str) -> list[str]:
    """Capture from a Gemini CLI hook event (AfterAgent, BeforeTool) and the chat
    recording it names."""
    from git_obversa.agents.gemini import ingest_gemini

    def ingest(event: dict, transcript: str, store, stage: str):
        final = event.get("prompt_response")
        said = final if event.get("hook_event_name") == "AfterAgent" else None
        return ingest_gemini(transcript, store, stage, prompt_response=said)

    return _capture_by_content(event_text, ingest)


def _capture_by_content(event_text: str, ingest) -> list[str]:
    import json

    from git_obversa.cli.record import after_capture, configured_stage, malformed_line
    from git_obversa.record.turns import TurnStore
    from git_obversa.repo import git

    try:
        event = json.loads(event_text)
    except json.JSONDecodeError as error:
        raise ValueError(f"the hook event on stdin is not JSON ({error.msg})") from error
    if not isinstance(event, dict):
        raise ValueError("the hook event on stdin is not a JSON object")
    if event.get("hook_event_name") in ("PreToolUse", "BeforeTool") and not _runs_git(event):
        return []  # only a command that may commit needs the reasoning before it runs
    transcript = event.get("transcript_path")
    if not isinstance(transcript, str) or not transcript:
        return []  # no session file to read (Codex sends null for some sessions)
    cwd = event.get("cwd") or os.getcwd()
    try:
        store = TurnStore.for_worktree(cwd)
    except git.GitError:
        return []  # not a Git worktree (or no such directory): nothing to capture for
    ingested = ingest(event, os.path.expanduser(transcript), store, configured_stage(cwd))
    lines = [malformed_line(ingested)] if ingested.malformed else []
    if ingested.turns:
        lines.extend(after_capture(store, cwd))
    return lines


def _runs_git(event: dict) -> bool:
    """Whether the tool call of a PreToolUse/BeforeTool event runs git."""
    tool_input = event.get("tool_input")
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    if isinstance(command, list):  # Codex's shell tool takes argv
        command = " ".join(part for part in command if isinstance(part, str))
    return isinstance(command, str) and "git" in command


AGENTS = {"claude-code": capture_claude_code, "codex": capture_codex, "gemini": capture_gemini}
