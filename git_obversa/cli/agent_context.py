"""`git obversa agent-context AGENT`: tell an agent, through its own hooks, the recorded
reasons behind lines it is about to change, and ground its session in memory.

`bin/git-obversa` answers this command before the command line is parsed (a hook runs
before every edit, so it starts as little as it can); this module gives it its help.
"""

from __future__ import annotations

import argparse

from git_obversa.cli.agent_hook import add_event_arguments

EPILOG = """\
`git obversa install --claude-code` (or --codex, --gemini, --copilot, --qwen) wires it
in beside `agent-hook`; `git obversa uninstall` takes it out again. It reads the hook event
(JSON) on stdin and prints what the client reads as added context, or nothing:

  before an edit (Claude Code Edit/MultiEdit/Write, Codex apply_patch, Gemini replace and
  write_file, Copilot edit, Qwen Code edit and write_file; Gemini and Qwen get it after
  the edit): the subject and why of each commit that wrote the lines concerned and
  recorded reasoning, at most 2,000 characters, each commit once per session, under the
  untrusted-data warning, ending with `git obversa why FILE:N-M`;
  at session start: the memory `git config obversa.ground "/memories/project.md
  /memories/decisions/"` names, grounded (`obversa.groundScope` picks the scope);
  at session end or compaction, with `git config obversa.consolidate true`: the reasons
  the session's commits recorded, folded into /memories/sessions/<date>.md.

`git config obversa.context false` turns all of it off. It never blocks the agent: any
problem gives nothing and exit 0. See docs/agents.md.
"""


def add_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    parser.description = (
        "Read an agent's hook event (JSON) from stdin and print the context to add: the "
        "recorded reasons behind the lines it is about to edit, or grounded memory."
    )
    parser.epilog = EPILOG
    add_event_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from git_obversa.agents.context_hooks import main

    return main([args.agent, *([args.event] if args.event else [])])
