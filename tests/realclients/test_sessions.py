"""Every commit a real agent client makes carries the reasoning of the response that made
it, and nothing else: no other response's text, no report written after the commit, no
text twice. On a quiet machine and on a busy one.

The scripted session, for each client: three responses that each explain, edit and
commit (and then report on the commit), one that edits without committing, a resumed
session that commits, and for Claude Code and Qwen Code a sub-agent that commits.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.realclients.conftest import commits, git, make_client, obversa, pending
from tests.realclients.driver import scrubbed_copy
from tests.realclients.model_server import Say, Shell, Task, Write

FIXTURES = Path(__file__).resolve().parent.parent.parent / "fixtures" / "realclients"

REASONS = {
    "budget": "Retries stop after 3 attempts because the gateway fails in bursts of two.",
    "jitter": "Jitter spreads the retries so that clients do not stampede the gateway.",
    "timeout": "The timeout is 5 seconds since the slowest healthy call takes 3.",
    "log": "Logging each retry makes a burst visible in the service dashboards.",
    "resume": "The limits move into one module so that operators tune them in one place.",
}
REPORTS = [
    "Done: committed the retry budget.",
    "Committed the jitter change as asked.",
    "Both changes are committed now.",
    "Committed the limits module.",
]
STATUS = "I have not committed it yet, as you asked."

pytestmark = pytest.mark.realclients


def respond(reason: str, path: str, content: str, subject: str, report: str, absolute: Path):
    """One response: explain, write a file, commit it, report."""
    return [
        [Say(reason), Write(str(absolute / path), content)],
        [Shell(f"git add {path} && git commit -m '{subject}'")],
        [Say(report)],
    ]


def approve_codex_hooks(client) -> None:
    """What the user does in Codex's `/hooks` review: trust the project's hooks, those
    that capture and those that hand context back."""
    from git_obversa.agents.codex import approval_toml, hook_trust
    from git_obversa.agents.context_hooks import CONTEXT_COMMAND
    from git_obversa.agents.settings import CODEX_HOOK

    hooks = client.repo / ".codex" / "hooks.json"
    trust = hook_trust(hooks, CODEX_HOOK) | hook_trust(hooks, CONTEXT_COMMAND.format(agent="codex"))
    with open(client.home / ".codex" / "config.toml", "a") as config:
        config.write(approval_toml(trust))


def install(client) -> None:
    done = obversa(client, "install", f"--{client.agent}")
    assert done.returncode == 0, done.stderr
    if client.agent == "codex":
        approve_codex_hooks(client)


def run(client, prompt: str, server, *messages, **options) -> None:
    server.script(*messages)
    result = client.run(prompt, **options)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
    assert server.left() == 0, f"the client asked less than scripted: {result.stdout[-800:]}"


SUBAGENTS = ("claude-code", "qwen")  # the clients whose model can hand work to a sub-agent


@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini", "copilot", "qwen"])
def test_each_commit_carries_the_why_of_its_response(agent, machine, server, tmp_path):
    client = make_client(agent, tmp_path, server)
    install(client)
    repo = client.repo
    run(
        client,
        "Add a retry budget and commit it.",
        server,
        *respond(
            REASONS["budget"], "retry.py", "RETRIES = 3\n", "Add a retry budget", REPORTS[0], repo
        ),
    )
    run(
        client,
        "Add jitter and commit it.",
        server,
        *respond(REASONS["jitter"], "jitter.py", "JITTER = 0.2\n", "Add jitter", REPORTS[1], repo),
        resume=True,
    )
    run(
        client,
        "Set the timeout and commit it.",
        server,
        *respond(
            REASONS["timeout"], "timeout.py", "TIMEOUT = 5\n", "Set the timeout", REPORTS[2], repo
        ),
        resume=True,
    )
    run(
        client,
        "Log each retry, but do not commit.",
        server,
        [Say(REASONS["log"]), Write(str(repo / "log.py"), "LOG = True\n")],
        [Say(STATUS)],
        resume=True,
    )
    run(
        client,
        "Move the limits into one module and commit everything.",
        server,
        [Say(REASONS["resume"]), Write(str(repo / "limits.py"), "LIMITS = {}\n")],
        [Shell("git add -A && git commit -m 'Collect the limits'")],
        [Say(REPORTS[3])],
        resume=True,
    )
    if agent in SUBAGENTS:
        run(
            client,
            "Have a sub-agent add the constants and commit them.",
            server,
            [
                Say("A sub-agent adds the constants while I check the rest."),
                Task("Add constants.py and commit it."),
            ],
            [
                Say("Constants live apart so that tests can patch them."),
                Write(str(repo / "constants.py"), "LIMIT = 3\n"),
            ],
            [Shell("git add constants.py && git commit -m 'Add constants'")],
            [Say("Sub-agent done.")],
            [Say("The sub-agent added constants.py and committed it.")],
            resume=True,
        )

    log = commits(client)
    by_subject = {commit["subject"]: commit for commit in log}
    expected = {
        "Add a retry budget": [REASONS["budget"]],
        "Add jitter": [REASONS["jitter"]],
        "Set the timeout": [REASONS["timeout"]],
        # The edits of the response that did not commit go in with this commit.
        "Collect the limits": [REASONS["log"], REASONS["resume"]],
    }
    if agent in SUBAGENTS:
        expected["Add constants"] = [
            "A sub-agent adds the constants while I check the rest.",
            "Constants live apart so that tests can patch them.",
        ]
    everything = (
        list(REASONS.values())
        + REPORTS
        + ["The sub-agent added constants.py and committed it.", "Sub-agent done."]
    )
    for subject, reasons in expected.items():
        why = by_subject[subject]["why"]
        for reason in reasons:
            assert why.count(reason[:40]) == 1, (subject, reason, why)
        for other in everything:
            if other not in reasons:
                assert other[:40] not in why, (subject, other, why)
    # Nothing waits to land on the user's next commit.
    assert [text for text in pending(client) if text != STATUS] == []
    keep_fixtures(client, machine)


def keep_fixtures(client, machine: str) -> None:
    """With OBVERSA_KEEP_FIXTURES set, copy what the real client wrote (transcripts) into
    fixtures/realclients/<agent>/, machine paths replaced."""
    if not os.environ.get("OBVERSA_KEEP_FIXTURES") or machine != "quiet":
        return
    target = FIXTURES / client.agent
    shutil.rmtree(target, ignore_errors=True)
    patterns = {
        "claude-code": ".claude/projects/**/*.jsonl",
        "codex": ".codex/sessions/**/*.jsonl",
        "gemini": ".gemini/tmp/**/chats/*.jsonl",
        "copilot": ".copilot/session-state/*/events.jsonl",
        "qwen": ".qwen/projects/*/*/**/*.jsonl",
    }
    replacements = {str(client.home): "/home/user", str(client.repo): "/home/user/src/app"}
    for found in sorted(client.home.glob(patterns[client.agent])):
        relative = str(found.relative_to(client.home))
        for old, new in replacements.items():  # a directory named after the project's path
            relative = relative.replace(
                re.sub(r"[^A-Za-z0-9]", "-", old), re.sub(r"[^A-Za-z0-9]", "-", new)
            )
        scrubbed_copy(found, target / relative, replacements)
    settings = {
        "claude-code": ".claude/settings.json",
        "codex": ".codex/hooks.json",
        "gemini": ".gemini/settings.json",
        "qwen": ".qwen/settings.json",
    }[client.agent]
    scrubbed_copy(client.repo / settings, target / "project" / settings, replacements)
    (target / "git-log.txt").write_text(git(client, "log", "--format=%s%n%b%n----"))
    (target / "VERSION").write_text(json.dumps({"agent": client.agent}) + "\n")


def test_aider_auto_commits_carry_the_reply_that_made_them(machine, server, tmp_path):
    client = make_client("aider", tmp_path, server)
    assert obversa(client, "install").returncode == 0
    files = [
        ("retry.py", "RETRIES = 3\n"),
        ("jitter.py", "JITTER = 0.2\n"),
        ("timeout.py", "TIMEOUT = 5\n"),
    ]
    keys = ["budget", "jitter", "timeout"]
    for key, (path, content) in zip(keys, files, strict=True):
        (client.repo / path).write_text("")
        git(client, "add", path)
        git(client, "commit", "-qm", f"Start {path}")
        run(client, f"Fill in {path}.", server, [Say(REASONS[key]), Write(path, content)])
    # A response whose edit Aider does not commit; the user commits it later.
    (client.repo / "log.py").write_text("")
    git(client, "add", "log.py")
    git(client, "commit", "-qm", "Start log.py")
    server.script([Say(REASONS["log"]), Write("log.py", "LOG = True\n")])
    client.env["AIDER_AUTO_COMMITS"] = "false"
    result = client.run("Fill in log.py, do not commit.")
    assert result.returncode == 0, result.stderr[-2000:]
    git(client, "commit", "-qam", "Log each retry")

    log = commits(client)
    made = [commit for commit in log if not commit["subject"].startswith("Start")]
    assert len(made) == 4, [commit["subject"] for commit in log]
    for commit, key in zip(reversed(made), [*keys, "log"], strict=True):
        why = commit["why"]
        assert why.count(REASONS[key][:40]) == 1, (commit["subject"], why)
        for other in REASONS.values():
            if other != REASONS[key]:
                assert other[:40] not in why, (commit["subject"], other, why)
    assert pending(client) == []


@pytest.mark.parametrize("agent", ["qwen"])
def test_a_forked_session_takes_nothing_twice(agent, server, tmp_path):
    """`--fork-session` copies the session's records into a new session: what the copy
    holds was taken already and is not taken again."""
    client = make_client(agent, tmp_path, server)
    install(client)
    repo = client.repo
    run(
        client,
        "Log each retry, but do not commit.",
        server,
        [Say(REASONS["log"]), Write(str(repo / "log.py"), "LOG = True\n")],
        [Say(STATUS)],
    )
    run(
        client,
        "Add jitter and commit everything.",
        server,
        *respond(REASONS["jitter"], "jitter.py", "JITTER = 0.2\n", "Add jitter", REPORTS[1], repo),
        resume=True,
        fork=True,
    )
    why = commits(client)[0]["why"]
    for reason in (REASONS["log"], REASONS["jitter"]):
        assert why.count(reason[:40]) == 1, why
    assert why.count(STATUS) <= 1 and REPORTS[1] not in why
    assert pending(client) == []
