"""Writing our entries into an agent's own settings files, and taking them out again.

`git obversa install --codex` / `--gemini` (and the `.mcp.json` part of `--claude-code`)
merge hook handlers and an MCP server entry into files the user may already have and
edit. The rules, for every file:

- Merge: only our entries are added; everything else stays as it is, in its order.
- Idempotent: installing twice changes nothing the second time.
- Reversible: uninstalling removes exactly what was added. When nothing else changed in
  between, the file is restored byte for byte (its original bytes are kept under the git
  dir); a file that install created is deleted again, and so is a directory it created.
- Our entries are recognized by value (a hook handler running `git obversa agent-hook`,
  the server named `obversa`), so a user who edits around them loses nothing.

JSON files get `{"hooks": {EVENT: [GROUP]}}` groups and `{"mcpServers": {NAME: SPEC}}`;
Codex's TOML config gets one marked block appended (no TOML writer in the standard
library, and a block is exactly removable).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from git_obversa.agents.context_hooks import CONTEXT_COMMAND, hook_groups, with_context_hooks
from git_obversa.repo import git

STATE_PATH = "obversa/agent-settings"
SERVER_NAME = "obversa"
BLOCK_START = "# >>> git-obversa (`git obversa uninstall --codex` removes this block)"
BLOCK_END = "# <<< git-obversa"


class SettingsError(Exception):
    """A settings file cannot be read or written; the message says which and why."""


@dataclass
class JsonEdit:
    """What to merge into one JSON settings file."""

    path: Path
    hooks: dict[str, list[dict]] = field(default_factory=dict)  # event -> groups to add
    servers: dict[str, dict] = field(default_factory=dict)  # name -> server spec
    command: str = ""  # the hook command that marks a handler as ours


@dataclass
class TomlEdit:
    """A block of TOML to append to one file."""

    path: Path
    block: str


@dataclass
class OwnFile:
    """A file of git-obversa's own in an agent's settings directory (a client that reads
    every file of a directory: Copilot CLI's `.github/hooks/*.json`)."""

    path: Path
    content: bytes


def install_own(edit: OwnFile, cwd: str | os.PathLike[str] | None = None) -> str:
    if _read(edit.path) == edit.content:
        return "already there"
    _remember(edit.path, None, cwd)
    _write(edit.path, edit.content)
    return "added"


def uninstall_own(edit: OwnFile, cwd: str | os.PathLike[str] | None = None) -> str:
    if _read(edit.path) is None:
        _recall(edit.path, cwd)[1].unlink(missing_ok=True)
        return "not there"
    return _restore(edit.path, None, cwd, b"")


def _state_file(path: Path, cwd: str | os.PathLike[str] | None) -> Path:
    key = hashlib.sha256(os.fsencode(path.resolve())).hexdigest()[:24]
    return git.git_path(STATE_PATH, cwd) / f"{key}.json"


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise SettingsError(f"cannot read {path}: {error.strerror or error}") from None


def _load_json(path: Path, data: bytes | None) -> dict:
    if data is None or not data.strip():
        return {}
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise SettingsError(f"{path} is not valid JSON ({error}); fix it and run again") from None
    if not isinstance(value, dict):
        raise SettingsError(f"{path} does not hold a JSON object; fix it and run again")
    return value


def _write(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.obversa-tmp")
        temporary.write_bytes(data)
        os.replace(temporary, path)
    except OSError as error:
        raise SettingsError(f"cannot write {path}: {error.strerror or error}") from None


def _dump(value: dict) -> bytes:
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _remember(path: Path, original: bytes | None, cwd: str | os.PathLike[str] | None) -> None:
    """Keep what the file (and its directory) looked like before the first install."""
    state = _state_file(path, cwd)
    if state.exists():
        return
    record = {
        "path": str(path.resolve()),
        "original": None if original is None else base64.b64encode(original).decode("ascii"),
        "created_directory": not path.parent.exists(),
    }
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps(record), encoding="utf-8")


def _recall(path: Path, cwd: str | os.PathLike[str] | None) -> tuple[dict | None, Path]:
    state = _state_file(path, cwd)
    try:
        record = json.loads(state.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None, state
    return (record if isinstance(record, dict) else None), state


def _restore(
    path: Path, remaining: bytes | None, cwd: str | os.PathLike[str] | None, empty: bytes
) -> str:
    """Write REMAINING (the file without our entries), or, with REMAINING None (what is
    left means what the file held before install), the original bytes; a file install
    created is deleted (its directory is `uninstall_agent`'s affair).
    EMPTY is what a file with nothing left holds when its history is unknown."""
    record, state = _recall(path, cwd)
    original = None
    if record is not None and isinstance(record.get("original"), str):
        original = base64.b64decode(record["original"])
    if remaining is not None:
        _write(path, remaining)
        action = "removed its entries"
    elif original is not None:
        _write(path, original)
        action = "restored the file as it was"
    elif record is not None:
        path.unlink(missing_ok=True)
        action = "removed the file it had created"
    else:
        _write(path, empty)
        action = "removed its entries"
    state.unlink(missing_ok=True)
    return action


def _is_ours(handler: Any, command: str) -> bool:
    # `agent-context` handlers (agents/context_hooks.py) are installed with the capture's.
    ours = (command, CONTEXT_COMMAND.format(agent=command.rsplit(" ", 1)[-1]))
    return isinstance(handler, dict) and handler.get("command") in ours


def install_json(edit: JsonEdit, cwd: str | os.PathLike[str] | None = None) -> str:
    """Merge EDIT into its file; returns "added" or "already there"."""
    original = _read(edit.path)
    settings = _load_json(edit.path, original)
    changed = False
    hooks = settings.get("hooks", {})
    if edit.hooks and not isinstance(hooks, dict):
        raise SettingsError(f'{edit.path}: "hooks" is not an object; fix it and run again')
    for event, groups in edit.hooks.items():
        present = hooks.get(event, [])
        if not isinstance(present, list):
            raise SettingsError(f'{edit.path}: "hooks.{event}" is not a list; fix it')
        for group in groups:
            mine = [h for h in group["hooks"] if _is_ours(h, edit.command)]
            taken = any(
                isinstance(g, dict)
                and g.get("matcher") == group.get("matcher")
                and any(_is_ours(h, edit.command) for h in g.get("hooks", []) or [])
                for g in present
            )
            if mine and not taken:
                present.append(group)
                changed = True
        if present:
            hooks[event] = present
    if hooks:
        settings["hooks"] = hooks
    servers = settings.get("mcpServers", {})
    if edit.servers and not isinstance(servers, dict):
        raise SettingsError(f'{edit.path}: "mcpServers" is not an object; fix it and run again')
    for name, spec in edit.servers.items():
        if name not in servers:  # a server of that name the user set up stays theirs
            servers[name] = spec
            changed = True
    if servers:
        settings["mcpServers"] = servers
    if not changed:
        return "already there"
    _remember(edit.path, original, cwd)
    _write(edit.path, _dump(settings))
    return "added"


def uninstall_json(edit: JsonEdit, cwd: str | os.PathLike[str] | None = None) -> str:
    """Take EDIT's entries out of its file; returns what was done."""
    data = _read(edit.path)
    if data is None:
        _recall(edit.path, cwd)[1].unlink(missing_ok=True)
        return "not there"
    settings = _load_json(edit.path, data)
    changed = False
    hooks = settings.get("hooks")
    if isinstance(hooks, dict):
        for event in list(hooks):
            if event not in edit.hooks or not isinstance(hooks[event], list):
                continue
            kept = []
            for group in hooks[event]:
                handlers = group.get("hooks") if isinstance(group, dict) else None
                if isinstance(handlers, list) and any(_is_ours(h, edit.command) for h in handlers):
                    changed = True
                    rest = [h for h in handlers if not _is_ours(h, edit.command)]
                    if rest:
                        kept.append({**group, "hooks": rest})
                else:
                    kept.append(group)
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
        if not hooks:
            del settings["hooks"]
    servers = settings.get("mcpServers")
    if isinstance(servers, dict):
        for name, spec in edit.servers.items():
            if servers.get(name) == spec:
                del servers[name]
                changed = True
        if not servers:
            del settings["mcpServers"]
    if not changed:
        _recall(edit.path, cwd)[1].unlink(missing_ok=True)
        return "not there"
    record, _ = _recall(edit.path, cwd)
    original = record.get("original") if record else None
    if isinstance(original, str):
        unchanged = _load_json(edit.path, base64.b64decode(original)) == settings
    else:
        unchanged = not settings  # install created the file: nothing of the user's in it
    return _restore(edit.path, None if unchanged else _dump(settings), cwd, b"{}\n")


def _block(edit: TomlEdit) -> str:
    return f"{BLOCK_START}\n{edit.block.rstrip()}\n{BLOCK_END}\n"


def install_toml(edit: TomlEdit, cwd: str | os.PathLike[str] | None = None) -> str:
    original = _read(edit.path)
    text = (original or b"").decode("utf-8", errors="surrogateescape")
    header = edit.block.lstrip().split("\n", 1)[0]
    if BLOCK_START in text:
        return "already there"
    if any(line.strip() == header for line in text.splitlines()):
        return "already there (yours; left as it is)"  # a second table would be invalid TOML
    separator = "" if not text or text.endswith("\n\n") else "\n" if text.endswith("\n") else "\n\n"
    _remember(edit.path, original, cwd)
    _write(edit.path, (text + separator + _block(edit)).encode("utf-8", errors="surrogateescape"))
    return "added"


def uninstall_toml(edit: TomlEdit, cwd: str | os.PathLike[str] | None = None) -> str:
    data = _read(edit.path)
    text = (data or b"").decode("utf-8", errors="surrogateescape")
    start = text.find(BLOCK_START)
    if data is None or start < 0:
        _recall(edit.path, cwd)[1].unlink(missing_ok=True)
        return "not there"
    end = text.find(BLOCK_END, start)
    end = len(text) if end < 0 else end + len(BLOCK_END)
    if text[end : end + 1] == "\n":
        end += 1
    remaining = text[:start] + text[end:]
    record, _ = _recall(edit.path, cwd)
    original = record.get("original") if record else None
    if isinstance(original, str):
        before = base64.b64decode(original).decode("utf-8", errors="surrogateescape")
        unchanged = remaining.rstrip("\n") == before.rstrip("\n")  # our separator goes too
    else:
        unchanged = not remaining.strip()
    encoded = remaining.encode("utf-8", errors="surrogateescape")
    return _restore(edit.path, None if unchanged else encoded, cwd, b"")


CODEX_HOOK = "git obversa agent-hook codex"
GEMINI_HOOK = "git obversa agent-hook gemini"
SERVER_COMMAND = {"command": "git", "args": ["obversa", "mcp"]}
AGENTS = ("codex", "gemini", "claude-code", "claude-code-mcp", "copilot", "qwen")


def agent_edits(agent: str, top: str | os.PathLike[str]) -> list[JsonEdit | TomlEdit | OwnFile]:
    """The settings files `install --AGENT` writes in the worktree at TOP.

    Codex: `.codex/hooks.json` (Stop after every turn; PreToolUse on Bash, so a commit
    made inside a turn carries that turn's reasoning) and the MCP server in
    `.codex/config.toml`. Gemini CLI: `.gemini/settings.json` (AfterAgent; BeforeTool on
    run_shell_command) and the MCP server. Claude Code: the MCP server in `.mcp.json`
    (its hooks are `install --claude-code`'s own part). Copilot CLI: a file of our own,
    `.github/hooks/git-obversa.json`. Qwen Code: `.qwen/settings.json` (Stop; PreToolUse
    and PostToolUse on run_shell_command) and the MCP server.
    """
    top = Path(top)
    if agent == "codex":
        handler = {"type": "command", "command": CODEX_HOOK}
        hooks = {
            "Stop": [{"hooks": [handler]}],
            "PreToolUse": [{"matcher": "Bash", "hooks": [dict(handler)]}],
            "PostToolUse": [{"matcher": "Bash", "hooks": [dict(handler)]}],
        }
        hooks = with_context_hooks(hooks, agent)
        server = (
            f"[mcp_servers.{SERVER_NAME}]\n"
            f'command = "{SERVER_COMMAND["command"]}"\n'
            f"args = {json.dumps(SERVER_COMMAND['args'])}\n"
        )
        return [
            JsonEdit(top / ".codex" / "hooks.json", hooks=hooks, command=CODEX_HOOK),
            TomlEdit(top / ".codex" / "config.toml", block=server),
        ]
    if agent == "gemini":
        handler = {"type": "command", "command": GEMINI_HOOK, "name": "git-obversa"}
        hooks = {
            "AfterAgent": [{"hooks": [handler]}],
            "BeforeTool": [{"matcher": "run_shell_command", "hooks": [dict(handler)]}],
            "AfterTool": [{"matcher": "run_shell_command", "hooks": [dict(handler)]}],
        }
        hooks = with_context_hooks(hooks, agent)
        servers = {SERVER_NAME: dict(SERVER_COMMAND)}
        path = top / ".gemini" / "settings.json"
        return [JsonEdit(path, hooks=hooks, servers=servers, command=GEMINI_HOOK)]
    if agent == "claude-code":
        from git_obversa.agents import claude_code

        settings = top / ".claude" / "settings.json"
        hooks = with_context_hooks(claude_code.HOOK_GROUPS, agent)
        edit = JsonEdit(settings, hooks=hooks, command=claude_code.HOOK_COMMAND)
        return [edit, *agent_edits("claude-code-mcp", top)]
    if agent == "qwen":
        from git_obversa.agents import qwen

        hooks = with_context_hooks(qwen.hook_groups(), agent)
        servers = {SERVER_NAME: dict(SERVER_COMMAND)}
        return [JsonEdit(top / qwen.SETTINGS, hooks=hooks, servers=servers, command=qwen.HOOK)]
    if agent == "copilot":
        from git_obversa.agents import copilot

        content = _dump(copilot.hooks_file_content(hook_groups(agent)))
        return [OwnFile(top / copilot.HOOKS_FILE, content)]
    if agent == "claude-code-mcp":
        servers = {SERVER_NAME: {"type": "stdio", **SERVER_COMMAND}}
        return [JsonEdit(top / ".mcp.json", servers=servers)]
    raise ValueError(f"unknown agent {agent!r}; expected one of {', '.join(AGENTS)}")


def install_agent(agent: str, top: str | os.PathLike[str]) -> list[dict[str, str]]:
    """Merge AGENT's entries into its files: [{"file", "action"}]."""
    return [
        {"file": str(edit.path), "action": _apply(edit, install=True, cwd=top)}
        for edit in agent_edits(agent, top)
    ]


def uninstall_agent(agent: str, top: str | os.PathLike[str]) -> list[dict[str, str]]:
    """Take AGENT's entries out of its files again: [{"file", "action"}]. A directory
    install created (`.codex`, `.gemini`) goes too when nothing else is left in it."""
    edits = agent_edits(agent, top)
    created = set()
    for edit in edits:
        record, _ = _recall(edit.path, top)
        if record and record.get("created_directory"):
            created.add(edit.path.parent)
    done = [
        {"file": str(edit.path), "action": _apply(edit, install=False, cwd=top)} for edit in edits
    ]
    for directory in created:
        try:
            directory.rmdir()  # only when empty: the user may have put files there since
        except OSError:
            pass
    return done


def _apply(edit: JsonEdit | TomlEdit | OwnFile, install: bool, cwd: str | os.PathLike[str]) -> str:
    if isinstance(edit, OwnFile):
        return install_own(edit, cwd) if install else uninstall_own(edit, cwd)
    if isinstance(edit, TomlEdit):
        return install_toml(edit, cwd) if install else uninstall_toml(edit, cwd)
    return install_json(edit, cwd) if install else uninstall_json(edit, cwd)
