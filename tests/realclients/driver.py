"""Runs a real agent client headless against the scripted model server.

Each client gets a throwaway HOME (its settings, sessions and transcripts land there),
the repository as its working directory, and only base-URL and key settings that point
at 127.0.0.1: nothing leaves the machine. `Client.run(prompt)` is one response of the
agent (one `claude -p`, `codex exec`, `gemini -p`, `copilot -p`, `qwen -p`,
`aider --message`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

CLIENTS_DIR = Path(
    os.environ.get("OBVERSA_CLIENTS_DIR", Path.home() / ".cache" / "git-obversa-realclients")
)
VERSIONS = Path(__file__).with_name("versions.txt")
PROGRAMS = {
    "claude-code": "claude",
    "codex": "codex",
    "gemini": "gemini",
    "aider": "aider",
    "copilot": "copilot",
    "qwen": "qwen",
}
TIMEOUT = 180


def pinned() -> dict[str, str]:
    """{package: version} of versions.txt."""
    versions = {}
    for line in VERSIONS.read_text().splitlines():
        fields = line.split()
        if len(fields) == 3 and not line.startswith("#"):
            versions[fields[1]] = fields[2]
    return versions


def program(agent: str) -> Path | None:
    path = CLIENTS_DIR / "bin" / PROGRAMS[agent]
    return path if path.exists() else None


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str


@dataclass
class Client:
    agent: str
    home: Path
    repo: Path
    url: str
    env: dict = field(default_factory=dict)
    session: str | None = None
    runs: list[Run] = field(default_factory=list)

    def environment(self) -> dict:
        path = os.pathsep.join(
            [str(Path(sys.executable).parent), str(CLIENTS_DIR / "bin"), os.environ["PATH"]]
        )
        env = {
            "HOME": str(self.home),
            "PATH": path,
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "NO_COLOR": "1",
            "CI": "1",
            "GIT_CONFIG_GLOBAL": str(self.home / ".gitconfig"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
        env.update(self.env)
        return env

    def command(self, prompt: str, resume: bool, fork: bool) -> list[str]:
        if self.agent == "claude-code":
            args = [
                str(program("claude-code")),
                "-p",
                prompt,
                "--output-format",
                "json",
                "--permission-mode",
                "bypassPermissions",
                "--model",
                "claude-sonnet-4-5",
            ]
            if resume and self.session:
                args += ["--resume", self.session]
                if fork:
                    args.append("--fork-session")
            return args
        if self.agent == "codex":
            base = [str(program("codex")), "exec"]
            if resume and self.session:
                base += ["resume", self.session]
            return base + [
                "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox",
                "--json",
                prompt,
            ]
        if self.agent == "gemini":
            args = [
                str(program("gemini")),
                "-p",
                prompt,
                "--yolo",
                "--output-format",
                "json",
                "-m",
                "gemini-2.5-flash",
            ]
            if resume and self.session:
                args += ["--resume", self.session]
            return args
        if self.agent == "copilot":
            args = [str(program("copilot")), "-p", prompt, "--allow-all-tools", "--no-auto-update"]
            if resume and self.session:
                args.append(f"--resume={self.session}")
            return args
        if self.agent == "qwen":
            args = [str(program("qwen")), "-p", prompt, "--yolo", "--output-format", "json"]
            if resume and self.session:
                args += ["--resume", self.session]
                if fork:
                    args.append("--fork-session")
            return args
        if self.agent == "aider":
            return [
                str(program("aider")),
                "--message",
                prompt,
                "--yes-always",
                "--model",
                "openai/gpt-test",
                "--openai-api-base",
                self.url + "/v1",
                "--openai-api-key",
                "sk-scripted",
                "--no-check-update",
                "--no-pretty",
                "--no-stream",
                "--no-show-model-warnings",
                "--analytics-disable",
                "--no-gitignore",
                "--edit-format",
                "whole",
                "--map-tokens",
                "0",
                "--no-detect-urls",
            ]
        raise ValueError(self.agent)

    def run(self, prompt: str, resume: bool = False, fork: bool = False) -> Run:
        done = subprocess.run(
            self.command(prompt, resume, fork),
            cwd=self.repo,
            env=self.environment(),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
        result = Run(done.returncode, done.stdout, done.stderr)
        self.runs.append(result)
        self._remember_session(result)
        return result

    def _remember_session(self, run: Run) -> None:
        if self.agent == "claude-code":
            try:
                self.session = json.loads(run.stdout).get("session_id") or self.session
            except ValueError:
                pass
        elif self.agent == "codex":
            for line in run.stdout.splitlines():
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if event.get("type") == "thread.started":
                    self.session = event.get("thread_id") or self.session
        elif self.agent == "qwen":
            try:
                said = json.loads(run.stdout)
            except ValueError:
                said = []
            for event in said if isinstance(said, list) else []:
                if isinstance(event, dict) and event.get("type") == "result":
                    self.session = event.get("session_id") or self.session
        elif self.agent == "gemini":
            try:
                self.session = json.loads(run.stdout).get("session_id") or self.session
            except ValueError:
                pass
        elif self.agent == "copilot":
            import re

            found = re.search(r"--resume=([0-9a-f-]{36})", run.stdout + run.stderr)
            self.session = found.group(1) if found else self.session


def make_home(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Agent User\n\temail = agent@example.com\n[init]\n\tdefaultBranch = main\n"
    )


def setup_client(agent: str, home: Path, repo: Path, url: str) -> Client:
    """The client's own configuration in HOME, pointing at URL, trusting REPO."""
    make_home(home)
    env: dict[str, str] = {}
    if agent == "claude-code":
        env.update(
            {
                "ANTHROPIC_BASE_URL": url,
                "ANTHROPIC_API_KEY": "sk-ant-scripted",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_AUTOUPDATER": "1",
                "DISABLE_TELEMETRY": "1",
                "DISABLE_ERROR_REPORTING": "1",
                "IS_SANDBOX": "1",  # bypassPermissions as root (CI runs as root)
                "CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION": "false",
            }
        )
        (home / ".claude.json").write_text(
            json.dumps(
                {
                    "hasCompletedOnboarding": True,
                    "projects": {str(repo): {"hasTrustDialogAccepted": True}},
                }
            )
        )
    elif agent == "codex":
        codex_home = home / ".codex"
        codex_home.mkdir()
        env.update({"CODEX_HOME": str(codex_home), "OPENAI_API_KEY": "sk-scripted"})
        (codex_home / "config.toml").write_text(
            'model = "gpt-5-codex"\nmodel_provider = "scripted"\n'
            "[model_providers.scripted]\n"
            'name = "scripted"\n'
            f'base_url = "{url}/v1"\n'
            'wire_api = "responses"\n'
            'env_key = "OPENAI_API_KEY"\n'
            "request_max_retries = 0\nstream_max_retries = 0\n"
            f'[projects."{repo}"]\ntrust_level = "trusted"\n'
        )
    elif agent == "gemini":
        env.update(
            {
                "GEMINI_API_KEY": "scripted-key",
                "GOOGLE_GEMINI_BASE_URL": url,
                "GEMINI_CLI_NO_RELAUNCH": "true",
            }
        )
        gemini_home = home / ".gemini"
        gemini_home.mkdir()
        (gemini_home / "settings.json").write_text(
            json.dumps(
                {
                    "security": {"auth": {"selectedType": "gemini-api-key"}},
                    "privacy": {"usageStatisticsEnabled": False},
                    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
                }
            )
        )
        (gemini_home / "trustedFolders.json").write_text(json.dumps({str(repo): "TRUST_FOLDER"}))
    elif agent == "copilot":
        env.update(
            {
                "COPILOT_HOME": str(home / ".copilot"),
                "COPILOT_OFFLINE": "true",  # no GitHub sign-in: the model is ours (BYOK)
                "COPILOT_PROVIDER_TYPE": "anthropic",
                "COPILOT_PROVIDER_BASE_URL": url,
                "COPILOT_PROVIDER_API_KEY": "sk-ant-scripted",
                "COPILOT_MODEL": "claude-sonnet-4.5",
                "COPILOT_ALLOW_ALL": "true",  # exactly "true": also trusts the folder
                "COPILOT_AUTO_UPDATE": "false",
            }
        )
    elif agent == "qwen":
        env.update(
            {
                "OPENAI_API_KEY": "sk-scripted",
                "OPENAI_BASE_URL": f"{url}/v1",
                "OPENAI_MODEL": "qwen-test",
                "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1",
                "QWEN_CODE_NO_RELAUNCH": "true",  # one process, not a second with more heap
            }
        )
        (home / ".qwen").mkdir()
        settings = {
            "security": {"auth": {"selectedType": "openai"}},
            "model": {"name": "qwen-test"},
            # Its background memory agents would ask the model too: not part of a session.
            "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        }
        (home / ".qwen" / "settings.json").write_text(json.dumps(settings))
    elif agent == "aider":
        env.update({"AIDER_ANALYTICS": "false", "AIDER_CHECK_UPDATE": "false"})
    return Client(agent, home, repo, url, env)


def scrubbed_copy(source: Path, target: Path, replacements: dict[str, str]) -> None:
    """Copy SOURCE to TARGET with each machine path replaced (fixtures carry no paths of
    the machine that wrote them)."""
    import re

    text = source.read_text(encoding="utf-8", errors="replace")
    for old, new in sorted(replacements.items(), key=lambda item: -len(item[0])):
        # Claude Code names a project's directory after its path, non-alphanumerics as '-'.
        text = text.replace(old, new).replace(
            re.sub(r"[^A-Za-z0-9]", "-", old), re.sub(r"[^A-Za-z0-9]", "-", new)
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


def which_ran() -> list[str]:
    return [agent for agent in PROGRAMS if program(agent)]


__all__ = ["Client", "setup_client", "pinned", "program", "which_ran", "scrubbed_copy", "shutil"]


# What a terminal answers to the queries Copilot CLI's full-screen interface sends before
# it draws (colours, cursor, keyboard protocol): it waits for them.
TERMINAL_ANSWERS = [
    (b"\x1b[?996n", b"\x1b[?997;1n"),
    (b"\x1b[?u", b"\x1b[?0u"),
    (b"\x1b]10;?\x1b\\", b"\x1b]10;rgb:ffff/ffff/ffff\x1b\\"),
    (b"\x1b]11;?\x1b\\", b"\x1b]11;rgb:0000/0000/0000\x1b\\"),
    (b"\x1b[6n", b"\x1b[1;1R"),
    (b"\x1b[c", b"\x1b[?62;22c"),
]


def trust_copilot_folder(client: Client, timeout: float = 60.0) -> None:
    """Start Copilot CLI interactively in the repository (on a pseudo-terminal) and answer
    its folder-trust question as a user does: "Yes, and remember this folder for future
    sessions". The client writes the trust itself; AssertionError if it never asks."""
    import fcntl
    import pty
    import re
    import select
    import signal
    import struct
    import termios
    import time

    env = {**client.environment(), "TERM": "xterm-256color"}
    for name in ("NO_COLOR", "CI", "COPILOT_ALLOW_ALL"):
        env.pop(name, None)
    pid, terminal = pty.fork()
    if pid == 0:  # the child: the client on the terminal
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        os.chdir(client.repo)
        program_path = str(program("copilot"))
        os.execve(program_path, [program_path, "--no-auto-update"], env)
    shown, answered = b"", False
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not select.select([terminal], [], [], 0.2)[0]:
                continue
            try:
                chunk = os.read(terminal, 65536)
            except OSError:
                break
            shown += chunk
            for query, answer in TERMINAL_ANSWERS:
                if query in chunk:
                    os.write(terminal, answer)
            for mode in re.findall(rb"\x1b\[\?(\d+)\$p", chunk):
                os.write(terminal, b"\x1b[?" + mode + b";2$y")
            for colour in re.findall(rb"\x1b\]4;(\d+);\?\x1b\\", chunk):
                os.write(terminal, b"\x1b]4;" + colour + b";rgb:8080/8080/8080\x1b\\")
            plain = re.sub(rb"\x1b\[[0-9;?<>]*[a-zA-Z]", b"", shown)
            if not answered and b"trust the files in this folder" in plain:
                time.sleep(0.3)
                os.write(terminal, b"\x1b[B")  # down to "Yes, and remember this folder …"
                time.sleep(0.3)
                os.write(terminal, b"\r")
                answered = True
            if answered and b"added to trusted folders" in plain:
                return
        raise AssertionError(f"Copilot CLI did not ask to trust the folder: {shown[-800:]!r}")
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(terminal)
