"""A Claude Code 2.1 session, end to end: the fixture transcript is written as Claude Code
writes it, the real hook command gets the real hook events at the moments Claude Code
sends them, and the agent's `git commit` runs for real with the hooks installed.

The fixture (fixtures/transcripts/make_claude_code_2_1.py) has two responses that each
commit inside the response, a third that only explains; messages split over several lines,
tool calls and results, a side chain, a compaction, a resume that writes old entries again,
a synthetic reply, agent-team protocol, a line cut short, a 200 KB block and secrets.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.gitutil import git, obversa

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "transcripts"
TRANSCRIPT = FIXTURES / "claude-code-2.1-session.jsonl"
HOOKS = json.loads((FIXTURES / "claude-code-2.1-session.hooks.json").read_text())

PADDING = "I'm restoring the padding before decoding rather than switching to a lenient decoder"
MULTIPLE = "signatures whose length is not a multiple of four"
EMPTY = "I'm rejecting empty signatures before comparing, so the check fails closed"
COMPARE = "Empty signatures pass because compare_digest of two empty strings is true"
LENIENT = "A lenient decoder would skip invalid characters"
NOT_REASONING = [
    "No response requested.",  # synthetic
    "Teammate protocol",  # agent-team protocol
    "Searching the tests directory",  # side chain
    "Caveat",  # meta
    "continued from a previous conversation",  # compaction summary
    "Done: unpadded signatures verify now",  # the report after commit 1
    "Both fixes are committed",  # the report after commit 2
    "has been updated",  # a tool result
]


def pending(cwd: Path) -> list[str]:
    completed = obversa("record", "show", "--raw", "--json", cwd=cwd)
    assert completed.returncode == 0, completed.stderr
    return [turn["text"] for turn in json.loads(completed.stdout)]


def message(cwd: Path, rev: str) -> str:
    return git(cwd, "log", "-1", "--format=%B", rev)


@pytest.fixture
def session(repo: Path, tmp_path: Path):
    """Run the whole session; returns (repo, {step index: hook stderr}, pending before each
    commit)."""
    assert obversa("install", cwd=repo).returncode == 0
    (repo / "signer").mkdir()
    for name in ("encoding.py", "verify.py"):
        (repo / "signer" / name).write_text("# placeholder\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "The signer")
    project = tmp_path / "home" / ".claude" / "projects" / "-home-dev-src-signer"
    project.mkdir(parents=True)
    transcript = project / f"{HOOKS['session_id']}.jsonl"
    lines = TRANSCRIPT.read_text().splitlines(keepends=True)
    written = 0
    stderr, before_commits = {}, []
    for index, step in enumerate(HOOKS["steps"]):
        with open(transcript, "a") as handle:
            handle.write("".join(lines[written : step["lines"]]))
        written = step["lines"]
        event = {
            "session_id": HOOKS["session_id"],
            "transcript_path": str(transcript),
            "cwd": str(repo),
            "permission_mode": "default",
            **{key: value for key, value in step.items() if key not in ("lines", "change")},
        }
        hook = obversa("agent-hook", "claude-code", cwd=repo, input=json.dumps(event))
        assert (hook.returncode, hook.stdout) == (0, ""), hook.stderr
        stderr[index] = hook.stderr
        if "change" in step:  # the agent edited a file, then runs its Bash command
            name, text = step["change"]
            (repo / name).write_text(text)
            before_commits.append(pending(repo))
            environment = {**os.environ, "GIT_EDITOR": ":"}
            command = step["tool_input"]["command"]
            ran = subprocess.run(
                command, shell=True, cwd=repo, capture_output=True, text=True, env=environment
            )
            assert ran.returncode == 0, ran.stderr
    with open(transcript, "a") as handle:
        handle.write("".join(lines[written:]))
    return repo, stderr, before_commits


def test_a_claude_code_session_end_to_end(session):
    # One run of the session (it takes seconds), four things a user would check.
    each_commit_made_inside_a_response_carries_that_responses_reasoning(*session)
    capture_takes_every_block_once_and_nothing_else(*session)
    the_line_cut_short_is_reported_once(*session)
    no_secret_reaches_a_commit(*session)


def each_commit_made_inside_a_response_carries_that_responses_reasoning(repo, stderr, before):
    first, second = message(repo, "HEAD~1"), message(repo, "HEAD")
    assert first.startswith("Accept unpadded URL-safe signatures\n")
    assert second.startswith("Reject empty signatures\n")
    # The decision with its reason is on the commit it explains, not on the other one.
    # (Which other sentences make the body is the composer's affair; what was captured
    # for each commit is checked whole below.)
    assert PADDING in " ".join(first.split())
    assert EMPTY not in " ".join(first.split()) and COMPARE not in " ".join(first.split())
    assert PADDING not in " ".join(second.split())  # the resume's replay added nothing
    assert MULTIPLE not in " ".join(second.split())


def test_the_200_kb_block_pushes_no_later_reasoning_out_of_the_commit(session):
    repo, _, _ = session
    assert EMPTY in " ".join(message(repo, "HEAD").split())


def capture_takes_every_block_once_and_nothing_else(repo, stderr, before):
    before_first, before_second = before
    assert before_first == [
        "I'll check how base64_decode is used",
        "It is only called from the signer",
        "Let me have a sub-agent look for the existing tests",
        before_first[3],
        before_first[4],
        before_first[5],
        "The tests pass. Committing the fix",
    ]
    assert MULTIPLE in before_first[3] and before_first[4].startswith(PADDING)
    assert before_second[0].startswith(COMPARE)
    assert before_second[1].startswith("Here is the whole test log before the change:")
    assert len(before_second[1]) > 200_000  # one block, one turn, whole
    assert before_second[2].startswith(EMPTY)
    assert before_second[3].startswith("Pushing will need the token")
    assert before_second[4:] == ["Committing"]
    # The third response only explained; Stop took its message before Claude Code wrote
    # it, and SessionEnd, reading it from the transcript later, did not take it again.
    assert [text[: len(LENIENT)] for text in pending(repo)] == [LENIENT]
    for text in before_first + before_second + pending(repo):
        assert not any(noise in text for noise in NOT_REASONING), text


def no_secret_reaches_a_commit(repo, stderr, before):
    assert git(repo, "commit", "--allow-empty", "-q", "-m", "Explain the decoder").strip() == ""
    history = git(repo, "log", "--format=%B")
    assert LENIENT in " ".join(history.split())
    for secret in HOOKS["secrets"]:
        assert secret not in history
        assert secret[:12] not in history
    assert "[redacted]" in history
    assert pending(repo) == []


def the_line_cut_short_is_reported_once(repo, stderr, before):
    warnings = [text for text in stderr.values() if "not JSON" in text]
    assert len(warnings) == 1
    assert warnings[0].strip().endswith("line 41 is not JSON; skipped")
    assert all(text in ("", warnings[0]) for text in stderr.values())
