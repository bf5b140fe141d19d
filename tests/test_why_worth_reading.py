"""Issue 25 items 2, 3 and 5 on real `git commit`: the five transcript cases a longer
session showed (narration, a status line, a synthetic entry, redaction at a join, trimmed
thinking) and `record note --thinking`. What the message leaves out is in the commit's
kept record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.gitutil import git, obversa
from tests.test_hook_e2e import capture, change, commit, message, pending

REASON = "Retry twice because the upstream API fails in bursts of two."


@pytest.fixture
def hooked(repo: Path) -> Path:
    assert obversa("install", cwd=repo).returncode == 0
    return repo


def committed(cwd: Path) -> str:
    change(cwd)
    completed = commit(cwd, "-m", "Retry")
    assert completed.returncode == 0, completed.stderr
    assert pending(cwd) == []
    return " ".join(message(cwd).split("Why:\n", 1)[1].split())


def kept(cwd: Path) -> str:
    shown = json.loads(obversa("record", "show", "HEAD", "--json", cwd=cwd).stdout)
    return " ".join(" ".join(turn["text"] for turn in shown["turns"]).split())


def test_narration_stays_out_of_the_message_and_in_the_record(hooked):
    narration = [
        "Now I'll run the full test suite to see what else breaks.",
        "Now I'll rewrite the retry loop so it uses the new helper.",
    ]
    capture(hooked, narration[0], REASON, narration[1], narration[0])
    why = committed(hooked)
    assert REASON in why
    assert not any(sentence in why for sentence in narration)
    assert all(sentence in kept(hooked) for sentence in narration)


def test_a_status_line_without_a_reason_stays_out(hooked):
    status = "Changed the timeout; I have not committed it yet, as you asked."
    capture(hooked, REASON, status)
    why = committed(hooked)
    assert REASON in why and "not committed" not in why
    assert status in kept(hooked)


def test_a_synthetic_entry_never_reaches_the_message(hooked, tmp_path):
    transcript = tmp_path / "session.jsonl"
    transcript.write_text(
        json.dumps(
            {
                "type": "assistant",
                "uuid": "u1",
                "sessionId": "s1",
                "timestamp": "2026-12-07T04:00:00Z",
                "message": {
                    "id": "m1",
                    "model": "claude-sonnet-4-5",
                    "role": "assistant",
                    "content": [{"type": "text", "text": REASON}],
                },
            }
        )
        + "\n"
    )
    # Claude Code ends a response it was not asked for with an entry it writes itself;
    # the Stop event hands its text over as the last message.
    event = {
        "hook_event_name": "Stop",
        "session_id": "s1",
        "transcript_path": str(transcript),
        "last_assistant_message": "No response requested.",
    }
    hooked_run = obversa("agent-hook", "claude-code", cwd=hooked, input=json.dumps(event))
    assert hooked_run.returncode == 0, hooked_run.stderr
    why = committed(hooked)
    assert REASON in why and "No response requested" not in why


def test_redaction_at_a_join_keeps_the_next_word(hooked):
    capture(
        hooked, "I called the API with the access token ghp_abcdefghijklmnopqrstuvwxyz0123456789"
    )
    capture(hooked, "Revoked it afterwards because a token in a transcript counts as leaked.")
    why = committed(hooked)
    assert "ghp_" not in why
    assert "Revoked it afterwards because" in why
    assert "Revoked it afterwards" in kept(hooked)


def test_trimmed_thinking_shows_a_marker(hooked):
    git(hooked, "config", "obversa.thinking", "include")
    sentences = [
        f"Step {n} of the analysis holds because the queue is bounded." for n in range(110)
    ]
    thinking = " ".join(sentences)  # about 6.5 kB
    assert 6000 < len(thinking) < 7000
    capture(hooked, thinking, kind="engine:thinking")
    why = committed(hooked)
    assert sentences[0] in why
    assert "characters left out …]" in why or "in the kept record" in why
    # Every sentence of the block is kept with the commit, up to the per-turn bound.
    record = kept(hooked)
    assert sentences[0] in record and sentences[-1] in record and "left out" in record


def test_record_note_thinking_says_at_once_that_the_message_leaves_it_out(hooked):
    thought = "The cache is per process, so a restart empties it."
    noted = obversa("record", "note", "--thinking", thought, cwd=hooked)
    assert noted.returncode == 0
    assert "thinking stays out of the commit message" in noted.stderr
    assert "git config obversa.thinking include" in noted.stderr
    capture(hooked, REASON)
    why = committed(hooked)
    assert thought not in why
    assert thought in kept(hooked)  # never dropped: kept with the commit

    git(hooked, "config", "obversa.thinking", "include")
    noted = obversa("record", "note", "--thinking", thought, cwd=hooked)
    assert noted.returncode == 0 and "stays out" not in noted.stderr
    change(hooked, "again.py")
    assert commit(hooked, "-m", "Again").returncode == 0
    assert thought in " ".join(message(hooked).split())
