"""The real agent clients, driven offline: see driver.py and model_server.py.

These tests run only under `-m realclients` (`.ci/run` does, in its own step, after
`tests/realclients/install.sh`); a client that is not installed is skipped with the
command that installs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.realclients.driver import Client, program, setup_client
from tests.realclients.model_server import ModelServer

RAN: dict[str, str] = {}


def pytest_terminal_summary(terminalreporter) -> None:
    if RAN:
        line = ", ".join(f"{agent} {version}" for agent, version in sorted(RAN.items()))
        terminalreporter.write_line(f"real clients run: {line}")


@pytest.fixture
def server():
    with ModelServer() as serving:
        yield serving


@pytest.fixture(params=["quiet", "busy"])
def machine(request):
    """A quiet machine, or one whose cores are all busy (the flush race shows there)."""
    if request.param == "quiet":
        yield "quiet"
        return
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(os.cpu_count() or 2)
    ]
    try:
        yield "busy"
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def make_client(agent: str, tmp_path: Path, server: ModelServer) -> Client:
    if program(agent) is None:
        pytest.skip(f"{agent} is not installed: run tests/realclients/install.sh")
    repo = tmp_path / "repo"
    repo.mkdir()
    client = setup_client(agent, tmp_path / "home", repo, server.url)
    env = client.environment()
    for args in (
        ["init", "-q"],
        # Gemini CLI runs git with GIT_CONFIG_GLOBAL=/dev/null: the identity lives here.
        ["config", "user.name", "Agent User"],
        ["config", "user.email", "agent@example.com"],
    ):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True)
    (repo / "README.md").write_text("A service client.\n")
    subprocess.run(["git", "add", "README.md"], cwd=repo, env=env, check=True)
    subprocess.run(["git", "commit", "-qm", "Start"], cwd=repo, env=env, check=True)
    version = (
        subprocess.run([str(program(agent)), "--version"], env=env, capture_output=True, text=True)
        .stdout.strip()
        .splitlines()
    )
    RAN[agent] = version[-1] if version else "?"
    return client


def git(client: Client, *args: str) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=client.repo,
        env=client.environment(),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def obversa(client: Client, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", "obversa", *args],
        cwd=client.repo,
        env=client.environment(),
        capture_output=True,
        text=True,
    )


def commits(client: Client) -> list[dict]:
    """The repository's commits, newest first: {"subject", "why", "message"}."""
    out = git(client, "log", "--format=%H%x00%s%x00%B%x1e")
    found = []
    for record in out.split("\x1e"):
        if not record.strip():
            continue
        sha, subject, message = record.strip("\n").split("\x00")
        why = message.split("\nWhy:\n", 1)[1] if "\nWhy:\n" in message else ""
        found.append({"sha": sha, "subject": subject, "why": why, "message": message})
    return found


def pending(client: Client) -> list[str]:
    done = obversa(client, "record", "show", "--json")
    assert done.returncode == 0, done.stderr
    return [turn["text"] for turn in json.loads(done.stdout)]
