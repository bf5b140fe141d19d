"""Issue 25 item 6: long and resumed agent sessions (fixtures/sessions, in each client's
own format) captured as the hooks capture them and committed with real `git commit`.
Each commit's why holds: every sentence that gives a reason is in the message or the
commit's kept record; no narration or status sentence (docs/reasoning.md lists their
patterns) is in the message; the message stays within its bound."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from git_obversa.agents.claude_code import ingest_claude_code
from git_obversa.agents.codex import ingest_codex
from git_obversa.agents.gemini import ingest_gemini
from git_obversa.record.composition import compose_ahead
from git_obversa.record.turns import TurnStore
from tests.gitutil import git, obversa
from tests.test_hook_e2e import change, commit, pending

SESSIONS = Path(__file__).resolve().parent.parent / "fixtures" / "sessions"
MANIFEST = json.loads((SESSIONS / "sessions.json").read_text())
INGEST = {"claude-code": ingest_claude_code, "codex": ingest_codex, "gemini": ingest_gemini}
# The why is about obversa.maxWhy (1,200) long, plus the line that says where the rest is.
WHY_BOUND = 1200 + 100


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("agent", sorted(MANIFEST))
def test_a_long_resumed_session_gives_whys_worth_reading(repo, tmp_path, agent):
    assert obversa("install", cwd=repo).returncode == 0
    session = MANIFEST[agent]
    store = TurnStore.for_worktree(repo)
    files = [(SESSIONS / name).read_text().splitlines(keepends=True) for name in session["files"]]
    written = [tmp_path / name for name in session["files"]]
    reasons = session["reasons"]
    per_commit = len(reasons) // len(session["commits"])
    recorded = []
    for number, (which, mark) in enumerate(session["commits"]):
        written[which].write_text("".join(files[which][:mark]))  # as far as the agent got
        INGEST[agent](written[which], store, "commit")
        compose_ahead(store.directory, repo)  # what every capture does
        change(repo, text=f"step = {number}\n")
        completed = commit(repo, "-m", f"Step {number}")
        assert completed.returncode == 0, completed.stderr
        assert pending(repo) == []
        body = git(repo, "log", "-1", "--format=%B")
        why = body.split("Why:\n", 1)[1].split("\nObversa-Record:", 1)[0]
        assert len(why) <= WHY_BOUND, why
        for sentence in session["said_not_reasons"]:
            assert flat(sentence) not in flat(why), sentence
        shown = json.loads(obversa("record", "show", "HEAD", "--json", cwd=repo).stdout)
        kept = flat(" ".join(turn["text"] for turn in shown["turns"]))
        assert {turn["agent"] for turn in shown["turns"]} == {agent}  # who said it, and when
        assert all(turn["time"] for turn in shown["turns"])
        recorded.append(kept)
        for sentence in reasons[number * per_commit : (number + 1) * per_commit]:
            assert flat(sentence) in flat(why) or flat(sentence) in kept, sentence
    # Nothing said about one commit lands on another, resumed or not.
    for number, kept in enumerate(recorded):
        for other, sentence in enumerate(reasons):
            if other // per_commit != number:
                assert flat(sentence) not in kept, (number, sentence)
