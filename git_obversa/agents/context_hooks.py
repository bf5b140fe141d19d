"""`git obversa agent-context AGENT`: what an agent is told, through its own hooks, without
asking: the recorded reasons behind lines it is about to change, the project's memory at
the start of a session, and (optionally) a summary of the session kept at its end.

Each agent's events, and what answers them (the answer is JSON on stdout, in the shape
the client reads; nothing at all when there is nothing to tell):

- Claude Code: `PreToolUse` on Edit/MultiEdit/Write -> `hookSpecificOutput.
  additionalContext` (the model reads it with the tool's result); `SessionStart` -> the
  grounded memory the same way; `SessionEnd` and `PreCompact` -> the summary.
- Codex: `PreToolUse` on a patch (Codex runs the model's `apply_patch` as a Bash call)
  and `SessionStart`, the same shape (Codex reads Claude Code's); it has no session-end
  event, so no summary.
- Gemini CLI: its `BeforeTool` cannot add context, its `AfterTool` can (appended to the
  tool's result): the reasons are worked out before `replace`/`write_file` runs, while the
  old lines are still there, and handed over after it; `read_file` gets the reasons behind
  what it read. `SessionStart` -> grounded memory; `SessionEnd`/`PreCompress` -> summary.
- GitHub Copilot CLI: `preToolUse` on its `edit` tool and `sessionStart` ->
  `{"additionalContext"}` (the model reads the edit's after the tool's result). Its
  payloads do not name their event: the handler's command line does
  (`agent-context copilot preToolUse`). No summary yet.
- Qwen Code: Claude Code's events and answer shape, but what `PreToolUse` returns is
  dropped (0.24.4): like Gemini, worked out at `PreToolUse` on `edit`/`write_file`, handed
  over at `PostToolUse`, and `read_file` gets the reasons behind what it read;
  `SessionStart` -> grounded memory; `SessionEnd` (not fired by headless `qwen -p`) and
  `PreCompact` -> summary.

Settings (git config): `obversa.context false` turns all of it off; `obversa.ground
"/memories/project.md /memories/decisions/"` names what a session starts grounded in
(`obversa.groundScope`, else `obversa.scope`, picks the scope; `obversa.groundJudge`, a
command, lets `pick` keep what applies); `obversa.consolidate`
(`true`, a directory ending in `/`, or a file) turns the summary on.

Never in the agent's way: any failure gives nothing and exit 0.
"""

import os
import sys

from git_obversa.lean import jsonscan

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

EDIT_TOOLS = {
    "claude-code": {"Edit", "MultiEdit", "Write"},
    "codex": {"apply_patch", "Bash"},  # Codex runs a model's apply_patch as a Bash call
    "gemini": {"replace", "write_file"},
    "copilot": {"edit"},  # its `create` makes new files only: no lines with a why
    "qwen": {"edit", "write_file"},
}
READ_TOOLS = {"gemini": {"read_file"}, "qwen": {"read_file"}}
# Clients whose before-tool hook cannot add context (Qwen Code drops what its PreToolUse
# returns): the reasons are worked out before the edit and handed over after it.
BEFORE_AFTER = {"gemini": ("BeforeTool", "AfterTool"), "qwen": ("PreToolUse", "PostToolUse")}
START = {"SessionStart"}
END = {"SessionEnd", "PreCompact", "PreCompress"}
KEYS = ("context", "ground", "groundscope", "groundjudge", "scope", "consolidate")


def main(argv: list[str]) -> int:
    """Answer the hook event on stdin for the agent ARGV names (and the event, for a
    client whose payload does not: Copilot CLI); always 0."""
    try:
        agent = argv[0] if argv else ""
        if agent not in EDIT_TOOLS:
            print(f"git obversa agent-context: unknown agent {agent!r}", file=sys.stderr)
            return 0
        answer = respond(agent, sys.stdin.read(), argv[1] if len(argv) > 1 else None)
        if answer:
            sys.stdout.write(answer)
    except Exception as error:  # never fail the agent: warn and carry on
        detail = str(error).splitlines()[0] if str(error) else type(error).__name__
        print(f"git obversa agent-context: warning: {detail}", file=sys.stderr)
    return 0


def respond(agent: str, text: str, name: str | None = None) -> str:
    """What to print for AGENT's hook event TEXT (named NAME when the payload does not
    say): the client's JSON, or ""."""
    event = jsonscan.loads(text)
    if not isinstance(event, dict):
        return ""
    if agent == "copilot":
        from git_obversa.agents import copilot

        event = copilot.event_fields(event, name or "")
        if event["tool_name"] in EDIT_TOOLS[agent]:
            event["tool_input"] = copilot.edit_input(event["tool_input"])
    name = event.get("hook_event_name")
    cwd = event.get("cwd") or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    session = event.get("session_id") if isinstance(event.get("session_id"), str) else ""
    tool = event.get("tool_name")
    tool_input = event.get("tool_input") if isinstance(event.get("tool_input"), dict) else {}
    if name not in START | END and tool not in EDIT_TOOLS[agent] | READ_TOOLS.get(agent, set()):
        return ""
    if tool == "Bash" and "*** Begin Patch" not in str(tool_input.get("command")):
        return ""  # a shell command that is no patch: nothing to look up
    asked = _settings(cwd)  # git answers while the lookup below runs
    if name in START | END:
        settings = asked()
        if not _on(settings):
            return ""
        from git_obversa.agents import session_memory

        if name in END:
            session_memory.summarize(cwd, session, settings)
            return ""
        session_memory.started(cwd, session)
        return _answer(agent, name, session_memory.grounded(cwd, settings))
    allowed = lambda: _on(asked())  # noqa: E731
    if agent in BEFORE_AFTER:
        told = _before_after(event, cwd, session, agent, tool_input, allowed)
        return _answer(agent, name, told)
    if name != "PreToolUse":
        return ""
    return _answer(agent, name, _edit_context(cwd, session, tool_input, allowed))


def configured(cwd: str) -> dict[str, str] | None:
    """The settings of the repository CWD is in (`obversa.ground` and the others this
    module reads), or None outside one."""
    return _settings(cwd)()


def _on(settings: dict[str, str] | None) -> bool:
    """Whether the context hooks are on (`obversa.context` not false) in a repository."""
    off = ("false", "no", "off", "0")
    return settings is not None and settings.get("context", "true").lower() not in off


def _edit_context(cwd: str, session: str, tool_input: dict, allowed: "Callable[[], bool]") -> str:
    from git_obversa.lookup.context import context_for_edit

    path = tool_input.get("file_path") or tool_input.get("path")
    if isinstance(path, str):
        return context_for_edit(cwd, path, tool_input, session, allowed)
    patch = tool_input.get("input") or tool_input.get("patch") or tool_input.get("command")
    if isinstance(patch, list):
        patch = "\n".join(part for part in patch if isinstance(part, str))
    if not isinstance(patch, str) or "*** Begin Patch" not in patch:
        return ""
    told = [
        context_for_edit(cwd, file, {"patch_hunks": hunks}, session, allowed)
        for file, hunks in patch_updates(patch)
    ]
    return "\n\n".join(text for text in told if text)


def patch_updates(patch: str) -> list[tuple[str, list[list[str]]]]:
    """The files an `apply_patch` patch updates, each with its hunks (lines as written)."""
    updates: list[tuple[str, list[list[str]]]] = []
    for line in patch.splitlines():
        if line.startswith("*** Update File: "):
            updates.append((line.removeprefix("*** Update File: ").strip(), [[]]))
        elif line.startswith("*** "):
            if line.startswith(("*** Move to:", "*** End of File")) and updates:
                continue
            updates.append(("", []))  # another file's section: not an update
        elif updates and updates[-1][0]:
            hunks = updates[-1][1]
            if line.startswith("@@"):
                hunks.append([])
            else:
                hunks[-1].append(line)
    return [(file, [h for h in hunks if h]) for file, hunks in updates if file]


def _before_after(
    event: dict,
    cwd: str,
    session: str,
    agent: str,
    tool_input: dict,
    allowed: "Callable[[], bool]",
) -> str:
    """Gemini, Qwen Code: before an edit, the reasons are kept for the call; after it,
    handed over. After a read, the reasons behind the lines read."""
    from git_obversa.agents import session_memory

    path = tool_input.get("file_path") or tool_input.get("absolute_path")
    if not isinstance(path, str):
        return ""
    name, (before, after) = event.get("hook_event_name"), BEFORE_AFTER[agent]
    if event.get("tool_name") in EDIT_TOOLS[agent]:
        key = f"{session}\0{path}"
        if name == before:
            kept = _edit_context(cwd, session, tool_input, allowed)
            session_memory.keep_for_later(cwd, key, kept)
            return ""
        return session_memory.take_kept(cwd, key) if name == after and allowed() else ""
    if name != after:
        return ""
    from git_obversa.lookup.context import context_for_read

    first = tool_input.get("offset") if isinstance(tool_input.get("offset"), int) else 0
    limit = tool_input.get("limit") if isinstance(tool_input.get("limit"), int) else 2000
    return context_for_read(cwd, path, first + 1, first + max(limit, 1), session, allowed)


def _answer(agent: str, name: str, context: str) -> str:
    if not context:
        return ""
    quoted = jsonscan.quote(context, ascii=False)
    if agent == "copilot":
        return f'{{"additionalContext": {quoted}}}\n'
    return (
        f'{{"hookSpecificOutput": {{"hookEventName": "{name}", "additionalContext": {quoted}}}}}\n'
    )


def _settings(cwd: str) -> "Callable[[], dict[str, str] | None]":
    """The `obversa.*` settings this module reads (lower-cased keys), or None outside a
    repository: asked of git now, given when the result is called."""
    from git_obversa.repo import git

    pattern = r"^obversa\.(" + "|".join(KEYS) + ")$"
    try:
        waiting = git.started([["config", "-z", "--get-regexp", pattern]], cwd)
    except (git.GitError, OSError):
        return lambda: None
    answer: list = []

    def settings() -> dict[str, str] | None:
        if not answer:
            try:
                [(status, output)] = waiting()
            except (git.GitError, OSError):
                status, output = -1, b""
            answer.append(None if status not in (0, 1) else _parsed(output))
        return answer[0]

    return settings


def _parsed(output: bytes) -> dict[str, str]:
    settings = {}
    for entry in output.decode("utf-8", "replace").split("\0"):
        key, _, value = entry.partition("\n")
        if key:
            settings[key.removeprefix("obversa.").lower()] = value
    return settings


CONTEXT_COMMAND = "git obversa agent-context {agent}"


def hook_groups(agent: str) -> dict[str, list[dict]]:
    """The hook groups `install --AGENT` adds for this module, in the client's settings
    shape (Gemini: timeouts in milliseconds, a handler name; Copilot CLI: flat entries,
    the event on the command line, a matcher on the tool's name)."""
    command = CONTEXT_COMMAND.format(agent=agent)
    if agent == "copilot":
        edit = {"type": "command", "bash": f"{command} preToolUse", "matcher": "edit"}
        start = {"type": "command", "bash": f"{command} sessionStart"}
        return {
            "preToolUse": [{**edit, "timeoutSec": 10}],
            "sessionStart": [{**start, "timeoutSec": 10}],
        }
    handler: dict = {"type": "command", "command": command}
    if agent == "gemini":
        handler.update(name="git-obversa-context", timeout=10000)
        edits = "replace|write_file"
        return {
            "BeforeTool": [{"matcher": edits, "hooks": [handler]}],
            "AfterTool": [{"matcher": f"{edits}|read_file", "hooks": [dict(handler)]}],
            "SessionStart": [{"hooks": [dict(handler)]}],
            "SessionEnd": [{"hooks": [dict(handler)]}],
            "PreCompress": [{"hooks": [dict(handler)]}],
        }
    handler["timeout"] = 10
    edits = "|".join(sorted(EDIT_TOOLS[agent]))
    if agent == "qwen":
        handler["name"] = "git-obversa-context"
        return {
            "PreToolUse": [{"matcher": edits, "hooks": [handler]}],
            "PostToolUse": [{"matcher": f"{edits}|read_file", "hooks": [dict(handler)]}],
            "SessionStart": [{"hooks": [dict(handler)]}],
            "SessionEnd": [{"hooks": [dict(handler)]}],
            "PreCompact": [{"hooks": [dict(handler)]}],
        }
    groups = {
        "PreToolUse": [{"matcher": edits, "hooks": [handler]}],
        "SessionStart": [{"hooks": [dict(handler)]}],
    }
    if agent == "claude-code":  # Codex has no session end, and compacts on its own
        groups["SessionEnd"] = [{"hooks": [dict(handler)]}]
        groups["PreCompact"] = [{"hooks": [dict(handler)]}]
    return groups


def with_context_hooks(hooks: dict[str, list[dict]], agent: str) -> dict[str, list[dict]]:
    """HOOKS (an agent's capture groups) with this module's groups added: a handler joins
    the group of the same event and matcher, so one group runs both."""
    merged = {event: [dict(group) for group in groups] for event, groups in hooks.items()}
    for event, groups in hook_groups(agent).items():
        present = merged.setdefault(event, [])
        for group in groups:
            same = next((g for g in present if g.get("matcher") == group.get("matcher")), None)
            if same is None:
                present.append(group)
            else:
                same["hooks"] = [*same["hooks"], *group["hooks"]]
    return merged
