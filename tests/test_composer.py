"""The built-in composer on a realistic agent session (fixtures/sessions): a why a reviewer
reads in one screen, every sentence that gives a reason kept, narration left out; and the
settings that shape it (obversa.maxWhy, obversa.thinking) through a real commit."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from git_obversa.record.composer import DEFAULT_MAX_WHY, builtin_compose
from git_obversa.record.message import format_block
from tests.gitutil import git, obversa
from tests.test_hook_e2e import capture, change, commit, message

ROOT = Path(__file__).resolve().parent.parent
SESSION = json.loads((ROOT / "fixtures" / "sessions" / "retry-budget.json").read_text())


@pytest.fixture
def hooked(repo: Path) -> Path:
    completed = obversa("install", cwd=repo)
    assert completed.returncode == 0, completed.stderr
    return repo


def compose(include_thinking: bool = False, max_chars: int = DEFAULT_MAX_WHY) -> dict:
    turns = [
        {"node": "implement", **turn}
        for turn in SESSION["turns"]
        if include_thinking or turn["kind"] != "engine:thinking"
    ]
    return builtin_compose({"captured": turns}, max_chars)


def test_the_session_fits_one_screen_and_keeps_every_reason():
    composed = compose()
    assert len(composed["body"]) <= DEFAULT_MAX_WHY
    for sentence in SESSION["reasons"]:
        assert sentence in composed["body"], sentence
    for sentence in SESSION["narration"]:
        assert sentence not in composed["body"], sentence


def test_the_note_comes_first_and_whole():
    note = next(turn["text"] for turn in SESSION["turns"] if turn["kind"] == "note")
    assert compose()["body"].startswith(note + "\n\n")


def test_the_subject_says_what_was_done_never_the_restated_request():
    for include_thinking in (False, True):
        subject = compose(include_thinking)["subject"]
        assert subject == "Add a retry budget to the payments client"


def test_a_smaller_budget_keeps_reasons_before_anything_else():
    composed = compose(max_chars=700)
    assert len(composed["body"]) <= 700
    kept = [sentence for sentence in SESSION["reasons"] if sentence in composed["body"]]
    assert len(kept) >= 4


def test_narration_that_gives_a_reason_is_kept():
    composed = builtin_compose(
        {
            "captured": [
                {"node": "n", "text": "I'll use a queue because the pool overflows in bursts."},
                {"node": "n", "text": "Let me check the tests."},
            ]
        }
    )
    assert composed["body"] == "I'll use a queue because the pool overflows in bursts."


def test_the_docs_show_what_the_composer_writes_for_the_session():
    docs = (ROOT / "docs" / "reasoning.md").read_text()
    shown = re.search(r"<!-- composed: retry-budget -->\n```(?:text)?\n(.*?)```", docs, re.DOTALL)
    assert shown, "docs/reasoning.md lost the composed example"
    composed = compose()
    expected = composed["subject"] + "\n\nWhy:\n" + "\n".join(format_block(composed["body"], "#"))
    assert shown.group(1).startswith(expected + "\n")


def test_max_why_and_thinking_settings_reach_the_commit(hooked):
    thought = "The gateway fails in bursts, so unbounded retries pile onto it."
    said = "Capped retries at ten because the importer must not stall. " + (
        "Kept the old client for a release because " + "the importer, " * 10 + "needs it."
    )
    capture(hooked, thought, kind="engine:thinking")
    capture(hooked, said.strip())
    change(hooked)
    assert commit(hooked, "-m", "Retry").returncode == 0
    body = message(hooked)
    assert thought not in body and "Capped retries at ten" in body  # thinking left out
    git(hooked, "config", "obversa.thinking", "include")
    git(hooked, "config", "obversa.maxWhy", "200")
    capture(hooked, thought, kind="engine:thinking")
    capture(hooked, said.strip())
    change(hooked, text="again = 1\n")
    assert commit(hooked, "-m", "Again").returncode == 0
    why = message(hooked).split("Why:\n", 1)[1].split("\n\nObversa-Record")[0]
    assert thought in " ".join(why.split())  # included now
    assert len(why) <= 200 and "Kept the old client" not in why  # and the budget holds
