"""`git obversa agent-hook`: capture an agent's reasoning from its hook event.

Wired into the agent's own hooks (`git obversa install --claude-code`), it runs before a
Bash tool call that may commit and after every response, and must never get in the
agent's way: any problem is one warning line on stderr and exit 0, with nothing on stdout
(a `PreToolUse` hook's stdout could be taken for a decision).
"""

from __future__ import annotations

import sys

from git_obversa.lean.grammar import Argument, Grammar

TYPE_CHECKING = False  # argparse only for --help and errors: a hook starts as little as it can
if TYPE_CHECKING:
    import argparse

AGENTS = ("claude-code", "codex", "gemini", "copilot", "qwen")

# The arguments of a command an agent's hook runs: which agent, and the event's name
# where the payload does not carry it.
EVENT_ARGUMENTS = (
    Argument("agent", choices=list(AGENTS), help="which agent sent the event"),
    Argument(
        "event",
        nargs="?",
        help="the event's name, for a client whose payload does not carry it (copilot)",
    ),
)

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
GitHub Copilot CLI (`install --copilot`, .github/hooks/git-obversa.json) runs
`agent-hook copilot EVENT`: its payloads do not name their event. Qwen Code (`install
--qwen`, .qwen/settings.json) runs `agent-hook qwen` at Stop and PreToolUse/PostToolUse
(run_shell_command).
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
    add_event_arguments(parser)
    parser.set_defaults(**GRAMMAR.defaults)


def add_event_arguments(parser: argparse.ArgumentParser) -> None:
    """EVENT_ARGUMENTS on PARSER, with the epilog kept as written."""
    import argparse

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    for argument in EVENT_ARGUMENTS:
        argument.add_to(parser)


def declared(name: str, words: list[str]) -> tuple[Grammar, list[str], dict]:
    """The grammar of the command, the words it reads (all of them), and no more values."""
    return GRAMMAR, words, {}


def run(args: argparse.Namespace) -> int:
    try:
        for line in capture(args.agent, sys.stdin.read(), args.event):
            print(f"git obversa agent-hook: {line}", file=sys.stderr)
    except Exception as error:  # never fail the agent: warn and carry on
        detail = str(error).splitlines()[0] if str(error) else type(error).__name__
        print(f"git obversa agent-hook: warning: reasoning not captured: {detail}", file=sys.stderr)
    return 0


def capture(agent: str, event_text: str, event: str | None = None) -> list[str]:
    """Act on AGENT's hook event (`agents.hook_events`); returns the lines to tell the user."""
    from git_obversa.agents.hook_events import handle
    from git_obversa.hooks.capture import after_capture, configured_stage, malformed_line
    from git_obversa.record.composition import config_output, parse_config

    settings: dict[str, bytes] = {}

    def stage_of(cwd: str) -> str:
        # The settings a capture reads, in one git call: the stage now, the rest to compose.
        settings[cwd] = config_output(cwd)
        return configured_stage(cwd, parse_config(settings[cwd]))

    outcome = handle(agent, event_text, stage_of, event)
    lines = [malformed_line(result) for result in outcome.results if result.malformed]
    if any(result.turns for result in outcome.results):
        lines.extend(after_capture(outcome.store, outcome.cwd, settings.get(outcome.cwd)))
    return lines + outcome.lines


# Read without argparse (`lean/grammar.py`). The process ends once its output is out
# (`cli._exit_at_once`): when `run` returns, the captured turns are written and closed,
# and no thread or child process outlives it.
GRAMMAR = Grammar(EVENT_ARGUMENTS, run=run, exit_at_once=True)
