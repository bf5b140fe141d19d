"""`git obversa install` and `git obversa uninstall`: the commit hooks of this repository."""

from __future__ import annotations

import argparse

from git_obversa.cli import Failure, print_json

INSTALL_EPILOG = """\
The hooks go where git runs this repository's hooks: .git/hooks, or core.hooksPath
when it is set. They run in every linked worktree. A hook already there is kept as
<name>.pre-obversa and runs first; installing again only refreshes the shims.

After installing, capture reasoning and commit as usual:
  git obversa install
  git obversa record note "Retry twice: the API fails in bursts of two."
  git commit -am "Retry API calls"
  git log -1            # the message now holds a Why: block

Using the pre-commit framework instead? See docs/reasoning.md (hook id
obversa-reasoning, one commit-msg hook).

With --claude-code / --codex / --gemini / --copilot / --qwen, the agent's own settings in this
worktree get git-obversa's hooks (its reasoning is captured before a commit it runs,
after it, and after every turn) and the MCP server (`git obversa mcp`):
.claude/settings.json and .mcp.json, .codex/hooks.json and .codex/config.toml,
.gemini/settings.json, .github/hooks/git-obversa.json, or .qwen/settings.json. Entries
already there stay;
installing again changes nothing; `git obversa uninstall --claude-code` (or --codex,
--gemini, --copilot) takes out exactly the agent's entries (the commit hooks stay until a
plain `git obversa uninstall`). Codex and Gemini CLI run a project's hooks only once
you approve them in the client; install says what is left to approve, and
`git obversa doctor` checks it at any time. See docs/agents.md.

Claude Code, Codex, Gemini CLI and Qwen Code also get the context hooks (`git obversa
agent-context`): before the agent edits lines, it is told the why their commits
recorded; a session starts grounded in `git config obversa.ground` and, with
`obversa.consolidate`, leaves a summary. `git config obversa.context false` turns them off.

With --sync [REMOTE] (default: origin, or the only remote), plain `git fetch` also
fetches the remote's memory (into refs/obversa-remote/, never over local memory), and a
`pre-push` hook makes every plain `git push` to it run `git obversa memory sync` first:
memory is merged, never forced, and the push exits as it would without git-obversa.
See docs/sync.md.

`git obversa --help` and `git help obversa` are Git's: they run `man git-obversa`. An
editable install (`pip install -e .`) leaves the manual page out, so `install` links it
from the checkout to where `man` looks beside the git-obversa program
(<prefix>/share/man/man1) when man finds no page (--json names the link it made).
"""

UNINSTALL_EPILOG = """\
Removes the shims `git obversa install` wrote and puts back the hooks it kept.
Captured turns that were not committed stay (see `git obversa record show`).

example:
  git obversa uninstall
"""


AGENT_FLAGS = {
    "claude-code": "Claude Code",
    "codex": "Codex",
    "gemini": "Gemini CLI",
    "copilot": "GitHub Copilot CLI",
    "qwen": "Qwen Code",
}


def add_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = INSTALL_EPILOG if name == "install" else UNINSTALL_EPILOG
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    verb = "write" if name == "install" else "remove"
    for agent, label in AGENT_FLAGS.items():
        parser.add_argument(
            f"--{agent}",
            action="store_true",
            help=f"also {verb} {label}'s hooks and MCP server in this worktree's settings",
        )
    if name == "install":
        parser.add_argument(
            "--sync",
            nargs="?",
            const="",
            metavar="REMOTE",
            help="also make plain fetch/push of REMOTE carry memory scopes",
        )
        parser.add_argument(
            "--attribution",
            nargs="?",
            const="git-ai,agent-trace",
            metavar="FORMATS",
            help="also note who wrote each commit's lines: git-ai and/or agent-trace (both)",
        )
    parser.set_defaults(run=run_install if name == "install" else run_uninstall)


def run_install(args: argparse.Namespace) -> int:
    return _run(args, "install")


def run_uninstall(args: argparse.Namespace) -> int:
    return _run(args, "uninstall")


def _run(args: argparse.Namespace, action: str) -> int:
    from git_obversa.hooks import install
    from git_obversa.repo.git import GitError

    try:
        # Refspecs first: a bad remote name fails before anything is written.
        wants_sync = getattr(args, "sync", None) is not None
        sync = _add_sync_refspecs(args.sync or None) if wants_sync else None
        wanted = getattr(args, "attribution", None)
        attribution = _enable_attribution(wanted) if wanted is not None else None
        agents = [agent for agent in AGENT_FLAGS if getattr(args, agent.replace("-", "_"))]
        if agents and action == "uninstall":
            report = {"hooks": [], "hooks_dir": None}  # the commit hooks stay for the others
        else:
            report = getattr(install, action)(**({"pre_push": True} if wants_sync else {}))
        if sync is not None:
            report["sync"] = sync
        if attribution is not None:
            report["attribution"] = attribution
        if agents:
            report["agents"] = {agent: _agent_files(agent, action) for agent in agents}
            if action == "install":
                report["approve"] = _still_to_approve(agents)
        if action == "install":
            report["manual_page"] = _link_manual_page()
    except GitError as error:
        raise Failure(f"{error} (run this inside a Git repository)") from error
    except (install.InstallError, OSError) as error:
        raise Failure(str(error)) from error
    if args.json:
        print_json(report)
        return 0
    for hook in report["hooks"]:
        kept = " (the hook that was there runs first)" if hook["kept"] else ""
        print(f"{hook['name']}: {hook['action']}{kept}")
    if report["hooks_dir"] is not None:
        print(f"hooks directory: {report['hooks_dir']}")
    for agent, files in report.get("agents", {}).items():
        for entry in files:
            print(f"{agent}: {entry['file']}: {entry['action']}")
    for agent, checks in report.get("approve", {}).items():
        for check in checks:
            print(f"{agent}: to approve: {check['detail']}; {check['fix']}")
    for key, values in report.get("attribution", {}).items():
        print(f"{key}: {', '.join(values)}")
    for key, values in report.get("sync", {}).items():
        for value in values:
            print(f"removed {value}" if key == "removed" else f"{key}: added {value}")
    return 0


def _link_manual_page() -> str | None:
    """Where the manual page was linked, or None when nothing was to be done.

    setuptools leaves data files out of an editable wheel, so after `pip install -e .`
    `man git-obversa` (what Git runs for `git obversa --help`) finds nothing. man looks
    in ../share/man of each directory on PATH: the page of the checkout is linked there,
    beside the git-obversa program, when man finds none and the checkout has one."""
    import shutil
    import subprocess
    from pathlib import Path

    program = shutil.which("git-obversa")
    source = Path(__file__).resolve().parents[2] / "man" / "git-obversa.1"
    if program is None or shutil.which("man") is None or not source.is_file():
        return None
    target = Path(program).parent.parent / "share" / "man" / "man1" / "git-obversa.1"
    if target.exists() or target.is_symlink():
        return None
    found = subprocess.run(["man", "-w", "git-obversa"], capture_output=True, check=False)
    if found.returncode == 0:
        return None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(source)
    except OSError:
        return None  # a prefix we may not write: the hooks matter, the page does not
    return str(target)


def _enable_attribution(value: str) -> dict[str, list[str]]:
    from git_obversa.attribution import emit

    try:
        return emit.enable(value)
    except ValueError as error:
        raise Failure(str(error)) from error


def _add_sync_refspecs(remote: str | None) -> dict[str, list[str]]:
    import os

    from git_obversa.sync import remote as sync

    try:
        return sync.add_sync_refspecs(os.getcwd(), remote)
    except sync.SyncError as error:
        raise Failure(str(error)) from error


def _still_to_approve(agents: list[str]) -> dict[str, list[dict]]:
    """What the user must still approve in each agent's client (Codex's /hooks review,
    Gemini's trusted folder): {agent: [check]} (`agents.doctor`)."""
    from dataclasses import asdict

    from git_obversa.agents.doctor import still_to_approve
    from git_obversa.repo import git

    top = git.output(["rev-parse", "--show-toplevel"]).strip()
    found = {agent: [asdict(check) for check in still_to_approve(agent, top)] for agent in agents}
    return {agent: checks for agent, checks in found.items() if checks}


def _agent_files(agent: str, action: str) -> list[dict[str, str]]:
    """Merge AGENT's hooks and MCP server into its settings files in this worktree (or
    take them out): [{"file", "action"}]. AGENT is a key of `agents.settings.agent_edits`."""
    from git_obversa.agents import settings
    from git_obversa.repo import git

    top = git.output(["rev-parse", "--show-toplevel"])
    try:
        if action == "install":
            return settings.install_agent(agent, top)
        return settings.uninstall_agent(agent, top)
    except settings.SettingsError as error:
        raise Failure(str(error)) from error
