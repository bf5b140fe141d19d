"""Where capture would go nowhere: the checks `git obversa doctor` runs.

For the repository and each agent: are the commit hooks installed, the agent's hooks
written into its settings (and current: an older install lacks the after-call hook), has
the client approved them (Codex runs a project's hooks only once the user reviewed them,
`[hooks.state]` in `$CODEX_HOME/config.toml`, and only in a trusted project), will it load
them (Gemini CLI reads a project's settings only in a trusted folder,
`~/.gemini/trustedFolders.json`; Qwen Code too once folder trust is on; Copilot CLI its
hooks only in one of the `trustedFolders` of `~/.copilot/config.json`), does the MCP server
answer, and when did capture last run. Every problem comes with what fixes it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from git_obversa.agents import settings


@dataclass
class Check:
    name: str  # what was looked at: "commit hooks", "codex hooks approved", ...
    ok: bool
    detail: str = ""  # what was found
    fix: str = ""  # what to run or click when not ok


@dataclass
class AgentReport:
    agent: str
    set_up: bool  # its hooks are in this worktree's settings
    checks: list[Check] = field(default_factory=list)
    last_capture: float | None = None  # seconds since the epoch

    def problems(self) -> list[Check]:
        return [check for check in self.checks if not check.ok]


def _ours(path: Path, command: str) -> dict[str, list]:
    """{event: [group]} of the groups in PATH's hooks that run COMMAND."""
    try:
        hooks = json.loads(path.read_text(encoding="utf-8")).get("hooks")
    except (OSError, ValueError, AttributeError):
        return {}
    found: dict[str, list] = {}
    for event, groups in (hooks if isinstance(hooks, dict) else {}).items():
        for group in groups if isinstance(groups, list) else []:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if any(isinstance(h, dict) and h.get("command") == command for h in handlers or []):
                found.setdefault(event, []).append(group)
    return found


def _hooks_check(agent: str, path: Path, command: str, wanted: dict) -> Check:
    present = _ours(path, command)
    missing = sorted(set(wanted) - set(present))
    if not present:
        return Check(f"{agent} hooks", False, f"none in {path}", f"git obversa install --{agent}")
    if missing:
        detail = f"{path} lacks {', '.join(missing)} (an older install)"
        return Check(f"{agent} hooks", False, detail, f"git obversa install --{agent}")
    return Check(f"{agent} hooks", True, f"in {path}")


def _events_of(hooks: dict, command: str) -> dict:
    """The events of HOOKS (install's groups) that have a handler running COMMAND."""
    return {
        event: groups
        for event, groups in hooks.items()
        if any(h.get("command") == command for group in groups for h in group["hooks"])
    }


def _context_check(agent: str, path: Path, top: Path) -> Check:
    """The context hooks (agents/context_hooks.py): installed, and on or turned off."""
    from git_obversa.agents.context_hooks import CONTEXT_COMMAND, hook_groups

    name = f"{agent} context hooks"
    present = _ours(path, CONTEXT_COMMAND.format(agent=agent))
    missing = sorted(set(hook_groups(agent)) - set(present))
    if missing:
        detail = f"{path} lacks {', '.join(missing)}"
        return Check(name, False, detail, f"git obversa install --{agent}")
    return _context_state(name, top)


def _context_state(name: str, top: Path) -> Check:
    """The installed context hooks: on, or turned off with `obversa.context`."""
    from git_obversa.agents.context_hooks import configured

    found = configured(str(top)) or {}
    if found.get("context", "true").lower() in ("false", "no", "off", "0"):
        return Check(name, True, "installed, turned off (git config obversa.context false)")
    grounded = found.get("ground", "").strip()
    return Check(name, True, f"on; session start grounded in: {grounded or 'nothing configured'}")


def _last_capture(store_dir: Path, agent: str) -> float | None:
    directory = store_dir / "agents" / agent
    stamps = [path.stat().st_mtime for path in directory.rglob("*") if path.is_file()]
    return max(stamps) if stamps else None


def codex_checks(top: Path) -> list[Check]:
    from git_obversa.agents import codex
    from git_obversa.agents.context_hooks import CONTEXT_COMMAND

    home = Path(codex.codex_home())
    config = home / "config.toml"
    hooks_json = top / ".codex" / "hooks.json"
    wanted = codex.hook_trust(hooks_json, settings.CODEX_HOOK)
    wanted |= codex.hook_trust(hooks_json, CONTEXT_COMMAND.format(agent="codex"))
    approved = codex.approved_hooks(config)
    stale = [key for key, value in wanted.items() if approved.get(key) != value]
    checks = []
    if stale:
        checks.append(
            Check(
                "codex hooks approved",
                False,
                f"{len(stale)} of {len(wanted)} git-obversa hooks not approved in {config}",
                "run `codex` in this repository, type /hooks and approve the git-obversa hooks",
            )
        )
    else:
        checks.append(Check("codex hooks approved", True, f"{len(wanted)} approved"))
    trusted = codex.project_trusted(config, top)
    checks.append(
        Check(
            "codex project trusted",
            trusted,
            "" if trusted else f"{top} is not a trusted project in {config}",
            "" if trusted else "run `codex` in this repository and trust it when asked",
        )
    )
    return checks


def gemini_checks(top: Path) -> list[Check]:
    from git_obversa.agents import gemini

    trusted = gemini.folder_trusted(top)
    if trusted:
        return [Check("gemini folder trusted", True, f"{top}")]
    return [
        Check(
            "gemini folder trusted",
            False,
            f"Gemini CLI loads {top}/.gemini/settings.json only in a trusted folder",
            'run `gemini` in this repository and choose "Trust folder" '
            "(or /permissions), then restart it",
        )
    ]


def qwen_checks(top: Path) -> list[Check]:
    """Will Qwen Code load the project's hooks: not with `disableAllHooks`, and, once the
    user turned folder trust on, only in a trusted folder."""
    from git_obversa.agents import qwen

    checks = []
    if qwen.hooks_disabled():
        checks.append(
            Check(
                "qwen hooks enabled",
                False,
                "~/.qwen/settings.json sets disableAllHooks: Qwen Code runs no hook",
                'remove "disableAllHooks": true from ~/.qwen/settings.json',
            )
        )
    if qwen.folder_trusted(top):
        checks.append(Check("qwen folder trusted", True, f"{top}"))
    else:
        checks.append(
            Check(
                "qwen folder trusted",
                False,
                f"Qwen Code loads {top}/.qwen/settings.json only in a trusted folder",
                "run `qwen` in this repository and trust the folder when asked "
                "(or /permissions), then restart it",
            )
        )
    return checks


def copilot_report(top: Path, store_dir: Path) -> AgentReport:
    from git_obversa.agents import copilot

    path = top / copilot.HOOKS_FILE
    (edit,) = settings.agent_edits("copilot", top)
    report = AgentReport("copilot", path.exists())
    report.last_capture = _last_capture(store_dir, "copilot")
    if report.set_up:
        try:
            current = path.read_bytes() == edit.content
        except OSError:
            current = False
        detail = f"{path}" if current else f"{path} is not what this version writes"
        fix = "" if current else "git obversa install --copilot"
        report.checks.append(Check("copilot hooks", current, detail, fix))
        if current:  # the file holds the context hooks too
            report.checks.append(_context_state("copilot context hooks", top))
        report.checks.extend(copilot_checks(top))
    return report


def copilot_checks(top: Path) -> list[Check]:
    from git_obversa.agents import copilot

    if copilot.folder_trusted(top):
        return [Check("copilot folder trusted", True, f"{top}")]
    return [
        Check(
            "copilot folder trusted",
            False,
            f"Copilot CLI loads {top}/{copilot.HOOKS_FILE} only in a trusted folder, "
            f"and {copilot.copilot_home() / 'config.json'} does not trust {top}",
            'run `copilot` in this repository and answer "Yes, and remember this folder '
            'for future sessions"',
        )
    ]


def mcp_check(top: Path, timeout: float = 20.0) -> Check:
    """Start `git obversa mcp` as a client would and ask it to initialize."""
    import subprocess

    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "git-obversa-doctor", "version": "1"},
        },
    }
    try:
        done = subprocess.run(
            ["git", "obversa", "mcp"],
            cwd=top,
            input=json.dumps(request) + "\n",
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout or ""
        done = None
        answered = '"serverInfo"' in (out if isinstance(out, str) else out.decode())
    else:
        answered = '"serverInfo"' in done.stdout
    if answered:
        return Check("mcp server", True, "`git obversa mcp` answers")
    reason = (done.stderr.strip().splitlines() or ["no answer"])[-1] if done else "no answer"
    return Check(
        "mcp server",
        False,
        f"`git obversa mcp` did not answer: {reason}",
        "pip install 'git-obversa[mcp]' where git-obversa is installed",
    )


AGENT_FILES = {
    "claude-code": (".claude/settings.json", "claude_code"),
    "codex": (".codex/hooks.json", "codex"),
    "gemini": (".gemini/settings.json", "gemini"),
    "qwen": (".qwen/settings.json", "qwen"),
}


def diagnose(cwd: str | os.PathLike[str] | None = None, mcp: bool = True) -> dict:
    """The whole report: {"repository", "commit_hooks", "agents": [...], "problems": n}."""
    from git_obversa.hooks.install import installed
    from git_obversa.repo import git

    top = Path(git.output(["rev-parse", "--show-toplevel"], cwd).strip())
    store_dir = git.git_path("obversa/record", cwd)
    hooks_ok = installed(cwd)
    commit = Check(
        "commit hooks",
        hooks_ok,
        "installed" if hooks_ok else "not installed: no commit here carries reasoning",
        "" if hooks_ok else "git obversa install",
    )
    reports = []
    any_mcp = False
    for agent, (relative, _) in AGENT_FILES.items():
        edits = settings.agent_edits(agent, top)
        hook_edit = edits[0]
        report = AgentReport(agent, bool(_ours(top / relative, hook_edit.command)))
        report.last_capture = _last_capture(store_dir, agent)
        if report.set_up:
            capture = _events_of(hook_edit.hooks, hook_edit.command)
            report.checks.append(_hooks_check(agent, top / relative, hook_edit.command, capture))
            report.checks.append(_context_check(agent, top / relative, top))
            if agent == "codex":
                report.checks.extend(codex_checks(top))
            elif agent == "gemini":
                report.checks.extend(gemini_checks(top))
            elif agent == "qwen":
                report.checks.extend(qwen_checks(top))
            any_mcp = True
        reports.append(report)
    reports.append(copilot_report(top, store_dir))
    aider = AgentReport("aider", (top / ".aider.chat.history.md").exists())
    aider.last_capture = _last_capture(store_dir, "aider")
    reports.append(aider)
    if any_mcp and mcp:
        check = mcp_check(top)
        for report in reports:
            if report.set_up and report.agent != "aider":
                report.checks.append(check)
    problems = (0 if hooks_ok else 1) + sum(len(report.problems()) for report in reports)
    return {
        "repository": str(top),
        "commit_hooks": asdict(commit),
        "agents": [
            {
                "agent": report.agent,
                "set_up": report.set_up,
                "last_capture": report.last_capture,
                "checks": [asdict(check) for check in report.checks],
            }
            for report in reports
        ],
        "problems": problems,
        "checked_at": time.time(),
    }


def still_to_approve(agent: str, top: str | os.PathLike[str]) -> list[Check]:
    """After `install --AGENT`: what the user must still approve in the client itself."""
    if agent == "codex":
        return [check for check in codex_checks(Path(top)) if not check.ok]
    if agent == "gemini":
        return [check for check in gemini_checks(Path(top)) if not check.ok]
    if agent == "qwen":
        return [check for check in qwen_checks(Path(top)) if not check.ok]
    if agent == "copilot":
        return [check for check in copilot_checks(Path(top)) if not check.ok]
    return []
