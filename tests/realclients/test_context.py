"""The why flows back to a real agent client: before it edits lines whose commit recorded
reasoning, the model's next request carries that reasoning under the untrusted-data
warning (once per session, within the bound); a session starts grounded in the memory
`obversa.ground` names. Driven offline against the scripted model server."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from git_obversa.lookup.context import LIMIT
from git_obversa.memory.mechanics import MEMORY_WARNING
from tests.realclients.conftest import git, make_client, obversa
from tests.realclients.model_server import Edit, Read, Say, Shell
from tests.realclients.test_sessions import approve_codex_hooks

pytestmark = pytest.mark.realclients

WHY = "Retries stop after 3 attempts because the gateway fails in bursts of two."
MEMORY = "Releases ship on Fridays; the retry budget is owned by the gateway team."


def seed(client) -> None:
    """retry.py written by a commit that records its why; plain.py by one that does not."""
    repo = client.repo
    (repo / "retry.py").write_text("RETRIES = 3\nDELAY = 1\n")
    (repo / "plain.py").write_text("NAME = 'client'\n")
    git(client, "add", "retry.py")
    git(client, "commit", "-qm", "Add a retry budget", "-m", f"Why:\n{WHY}")
    git(client, "add", "plain.py")
    git(client, "commit", "-qm", "Name the client")


def strings(value) -> list[str]:
    """Every string in a request body."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [text for item in value for text in strings(item)]
    return []


def texts(request) -> str:
    return json.dumps(request.body, ensure_ascii=False)


def scripted(server) -> list:
    return [request for request in server.requests if request.scripted]


def install(client) -> None:
    done = obversa(client, "install", f"--{client.agent}")
    assert done.returncode == 0, done.stderr
    if client.agent == "codex":
        approve_codex_hooks(client)


def run(client, server, prompt, *messages) -> None:
    server.script(*messages)
    result = client.run(prompt)
    assert result.returncode == 0, (result.stdout[-1500:], result.stderr[-1500:])
    assert server.left() == 0, result.stdout[-800:]


@pytest.mark.parametrize("agent", ["claude-code", "gemini", "copilot", "qwen"])
def test_an_edit_is_told_the_why_of_its_lines_once(agent, server, tmp_path):
    client = make_client(agent, tmp_path, server)
    seed(client)
    install(client)
    retry, plain = str(client.repo / "retry.py"), str(client.repo / "plain.py")
    run(
        client,
        server,
        "Raise the retry budget, rename the client, then lower the delay.",
        [Read(retry)],
        [Edit(retry, "RETRIES = 3", "RETRIES = 5")],
        [Read(plain)],
        [Edit(plain, "'client'", "'service'")],
        [Edit(retry, "DELAY = 1", "DELAY = 2")],
        [Say("Done.")],
    )
    requests = scripted(server)
    assert len(requests) == 6
    # The request after the first edit of retry.py carries its why, inside the warning
    # (Gemini and Qwen Code, whose hooks add context only after a tool ran: after it read
    # the file).
    told_at = {"claude-code": 2, "gemini": 1, "copilot": 2, "qwen": 1}[agent]
    assert WHY in texts(requests[told_at]) and WHY not in texts(requests[told_at - 1])
    [holder] = [text for text in strings(requests[told_at].body) if WHY in text]
    more = holder.index("`", holder.index("`git obversa why retry.py:1-") + 1) + 1
    told = holder[holder.index(MEMORY_WARNING) : more]
    assert WHY in told and len(told) <= LIMIT
    # plain.py's commit records nothing: its edit adds nothing of ours.
    assert texts(requests[4]).count(json.dumps(MEMORY_WARNING)[1:-1]) == 1
    # The second edit of retry.py's commit's lines is not told again.
    assert texts(requests[5]).count(WHY) == 1
    assert (client.repo / "retry.py").read_text() == "RETRIES = 5\nDELAY = 2\n"


@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini", "copilot", "qwen"])
def test_a_session_starts_grounded_only_when_configured(agent, server, tmp_path):
    client = make_client(agent, tmp_path, server)
    install(client)
    done = obversa(client, "memory", "create", "/memories/project.md", MEMORY)
    assert done.returncode == 0, done.stderr
    run(client, server, "What do you know?", [Say("Nothing yet.")])
    first = texts(scripted(server)[0])
    assert MEMORY not in first and json.dumps(MEMORY_WARNING)[1:-1] not in first

    git(client, "config", "obversa.ground", "/memories/project.md /memories/decisions/")
    server.requests.clear()
    run(client, server, "What do you know now?", [Say("The release rule.")])
    first = texts(scripted(server)[0])
    warning = json.dumps(MEMORY_WARNING)[1:-1]
    assert warning in first and MEMORY in first
    assert first.index(warning) < first.index(MEMORY)


def test_context_is_off_with_one_setting(server, tmp_path):
    client = make_client("claude-code", tmp_path, server)
    seed(client)
    install(client)
    git(client, "config", "obversa.context", "false")
    git(client, "config", "obversa.ground", "/memories/project.md")
    subprocess.run(
        ["git", "obversa", "memory", "create", "/memories/project.md", MEMORY],
        cwd=client.repo,
        env=client.environment(),
        check=True,
        capture_output=True,
    )
    retry = str(client.repo / "retry.py")
    run(
        client,
        server,
        "Raise the retry budget.",
        [Read(retry)],
        [Edit(retry, "RETRIES = 3", "RETRIES = 5")],
        [Say("Done.")],
    )
    everything = "".join(texts(request) for request in scripted(server))
    assert WHY not in everything and MEMORY not in everything


def patch(path: str, old: str, new: str) -> str:
    return (
        f"apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: {path}\n@@\n"
        f"-{old}\n+{new}\n*** End Patch\nEOF"
    )


def test_a_codex_patch_is_told_the_why_of_its_lines_once(server, tmp_path):
    client = make_client("codex", tmp_path, server)
    seed(client)
    install(client)
    run(
        client,
        server,
        "Raise the retry budget, rename the client, then lower the delay.",
        [Shell(patch("retry.py", "RETRIES = 3", "RETRIES = 5"))],
        [Shell(patch("plain.py", "NAME = 'client'", "NAME = 'service'"))],
        [Shell(patch("retry.py", "DELAY = 1", "DELAY = 2"))],
        [Say("Done.")],
    )
    requests = scripted(server)
    assert len(requests) == 4
    assert WHY not in texts(requests[0]) and WHY in texts(requests[1])
    [holder] = [text for text in strings(requests[1].body) if WHY in text]
    more = "`git obversa why retry.py:1-1`"
    told = holder[holder.index(MEMORY_WARNING) : holder.index(more) + len(more)]
    assert len(told) <= LIMIT
    assert texts(requests[3]).count(WHY) == 1  # plain.py adds nothing; retry.py not again
    assert (client.repo / "retry.py").read_text() == "RETRIES = 5\nDELAY = 2\n"


def test_a_claude_code_session_leaves_a_summary(server, tmp_path):
    from tests.realclients.model_server import Write

    client = make_client("claude-code", tmp_path, server)
    install(client)
    git(client, "config", "obversa.consolidate", "true")
    reason = "The budget is three because the gateway fails in bursts of two."
    run(
        client,
        server,
        "Add a retry budget and commit it.",
        [Say(reason), Write(str(client.repo / "budget.py"), "BUDGET = 3\n")],
        [Shell("git add budget.py && git commit -m 'Add a retry budget'")],
        [Say("Committed.")],
    )
    assert reason in git(client, "log", "-1", "--format=%B")
    day = time.strftime("%Y-%m-%d")
    shown = obversa(client, "memory", "view", f"/memories/sessions/{day}.md")
    assert shown.returncode == 0, shown.stderr
    assert "Add a retry budget" in shown.stdout and reason in shown.stdout
