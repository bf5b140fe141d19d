"""Issue 25 item 4: a capture prepares only its new turns. What a capture keeps to compose
ahead (record/prepared.py: the `composer.Selection` of what was said, a snapshot of where
the turns end) is updated by the new turns only, stays bounded by `obversa.maxWhy` however
much is pending, and gives the message that composing every turn afresh gives: held equal
to the plain recompute (`composer.select`, `composition.compose`) on random sessions and on
the corpus of real-shaped sessions, capture by capture. Real stores in real repositories."""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
from pathlib import Path

import pytest

from git_obversa.record.composer import CUT, Selection, select
from git_obversa.record.composition import (
    COMPOSED,
    CONFIG_PATTERN,
    compose,
    compose_ahead,
    composition_for,
    config_output,
    plain_config,
    read_config,
    read_packed,
    unpack,
)
from git_obversa.record.message import comment_chars
from git_obversa.record.prepared import SNAPSHOT
from git_obversa.record.turns import TurnStore
from tests.gitutil import git, obversa
from tests.test_sessions_fixtures import INGEST, MANIFEST, SESSIONS

WORDS = "the retry budget caps how many requests we send again while the gateway fails".split()


def fill(store: TurnStore, megabytes: float, start: int = 0) -> int:
    turns, size, number = [], 0, start
    while size < megabytes * 1e6:
        number += 1
        text = f"Turn {number}: " + " ".join(WORDS[number % 5 :]) + ", because of bursts."
        turns.append({"stage": "commit", "node": "commit", "kind": "engine:text", "text": text})
        size += len(text)
    store.append(turns)
    return number


def reasoning(store: TurnStore) -> str:
    return unpack(read_packed(str(store.directory / COMPOSED)))[4]


def afresh(store: TurnStore, repo: Path) -> str:
    """The reasoning composing every pending turn from scratch gives (what a commit does
    when nothing was composed ahead)."""
    config = read_config(repo)
    turns = store.read()
    messages, carried = compose(turns, {"status": "pass", "summary": None}, config, repo)
    chars = comment_chars(config.get("core.commentchar"))
    return composition_for(messages, turns, carried, chars).reasoning


def test_a_capture_pays_for_its_new_turns_and_composes_the_same(repo: Path):
    assert obversa("install", cwd=repo).returncode == 0
    store = TurnStore.for_worktree(repo)
    fill(store, 1.0)
    started = time.process_time()
    assert compose_ahead(store.directory, repo)
    first = time.process_time() - started
    costs = []
    for number in range(3):
        store.append(
            [{"stage": "commit", "node": "commit", "kind": "note", "text": f"Note {number}."}]
        )
        started = time.process_time()
        assert compose_ahead(store.directory, repo)
        costs.append(time.process_time() - started)
    assert min(costs) < 0.3 * first, (first, costs)
    # The same message as composing every turn afresh.
    messages, _ = compose(
        store.read(), {"status": "pass", "summary": None}, read_config(repo), repo
    )
    assert "Note 2." in reasoning(store)
    assert " ".join(reasoning(store).split()) == " ".join(messages[0]["body"].split())


def test_a_capture_costs_the_same_with_ten_times_more_pending(repo: Path):
    assert obversa("install", cwd=repo).returncode == 0
    store = TurnStore.for_worktree(repo)
    number = fill(store, 0.3)
    assert compose_ahead(store.directory, repo)
    small, snapshot = capture_costs(store, repo, number)
    number = fill(store, 3.0, start=number + 10)
    assert compose_ahead(store.directory, repo)
    large, grown = capture_costs(store, repo, number)
    # What is kept between captures does not grow with what is pending; nor what one costs.
    assert grown < 2 * snapshot + 4096, (snapshot, grown)
    assert large < 2 * small + 0.01, (small, large)
    assert reasoning(store) == afresh(store, repo)


def capture_costs(store: TurnStore, repo: Path, number: int) -> tuple[float, int]:
    """The least CPU time of a few captures of one reason each, composed ahead, and the
    size of the snapshot they keep."""
    costs = []
    for extra in range(5):
        text = f"Turn {number}-{extra}: capped the retries because the gateway fails."
        store.append([{"stage": "commit", "node": "commit", "kind": "engine:text", "text": text}])
        started = time.process_time()
        assert compose_ahead(store.directory, repo)
        costs.append(time.process_time() - started)
    return min(costs), os.path.getsize(store.directory / SNAPSHOT)


SENTENCES = (
    "I added a cap on retries because bursts of errors storm the gateway.",
    "Keep the budget per request.",
    "Let me check the tests.",
    "It works.",
    "We use a token bucket so that one slow upstream cannot starve the rest.",
    "The limit is two seconds.",
    "- first item of a list",
    "I'll now run the suite.",
    "Switched to jittered backoff instead of a fixed delay.",
)


def random_units(rng: random.Random, count: int) -> list[list[tuple[int, int, str]]]:
    """COUNT units' candidate sentences as `unit_candidates` gives them: paragraphs,
    tiers (cut markers among them), sentences of many lengths and many alike."""
    units = []
    for _ in range(count):
        found, paragraph = [], 0
        for _ in range(rng.randint(0, 5)):
            paragraph += rng.random() < 0.3
            if rng.random() < 0.08:
                found.append((paragraph, CUT, "[… 1,234 characters left out …]"))
                continue
            sentence = rng.choice(SENTENCES)
            if rng.random() < 0.5:
                sentence = sentence[: rng.randint(3, len(sentence))]
            found.append((paragraph, rng.randint(0, 5), sentence))
        units.append(found)
    return units


@pytest.mark.parametrize("seed", range(40))
def test_the_incremental_selection_is_the_plain_one_on_random_sessions(seed: int):
    rng = random.Random(seed)
    for _ in range(20):
        units = random_units(rng, rng.randint(0, 80))
        notes = [rng.choice(SENTENCES) for _ in range(rng.choice([0, 0, 1, 3]))]
        max_chars = rng.choice([10, 60, 150, 300, 1200])
        selection = Selection(max_chars)
        for number, found in enumerate(units):
            selection.add(found)
            if rng.random() < 0.3:  # kept in a file between captures
                state = json.loads(json.dumps(selection.state()))
                assert Selection.well_formed(state)
                selection = Selection(max_chars, state)
            if rng.random() < 0.2:
                assert selection.why(notes) == select(notes, units[: number + 1], max_chars)
        assert selection.why(notes) == select(notes, units, max_chars)


def test_what_is_kept_is_bounded_by_the_why_not_by_what_is_pending():
    rng = random.Random(7)
    selection = Selection(300)
    sizes = []
    for _ in range(2):
        for found in random_units(rng, 20_000):
            selection.add(found)
        sizes.append(len(selection.kept))
    # At most 300 // (length + 2) sentences of each length and tier, cut markers beside.
    bound = sum(300 // (length + 2) for length in range(1, 300)) * 6
    assert sizes[1] < 2 * bound
    assert sizes[1] - sizes[0] < sizes[0] / 20, sizes  # twice the units, next to nothing more


@pytest.mark.parametrize("max_why", [None, "300"])
@pytest.mark.parametrize("agent", sorted(MANIFEST))
def test_composing_ahead_capture_by_capture_is_composing_afresh(repo, tmp_path, agent, max_why):
    """The corpus of real-shaped sessions, captured as their hooks capture them (many
    captures, no commit), composed ahead after each: always the message composing every
    pending turn afresh gives."""
    assert obversa("install", cwd=repo).returncode == 0
    if max_why:
        git(repo, "config", "obversa.maxWhy", max_why)
    session = MANIFEST[agent]
    store = TurnStore.for_worktree(repo)
    files = [(SESSIONS / name).read_text().splitlines(keepends=True) for name in session["files"]]
    written = [tmp_path / name for name in session["files"]]
    marks = [(which, mark) for which, mark in session["commits"]]
    if agent != "gemini":  # one JSON document: only whole at the marks
        marks = sorted({*marks, *((0, mark) for mark in range(10, marks[-1][1], 17))})
    for which, mark in marks:
        written[which].write_text("".join(files[which][:mark]))
        INGEST[agent](written[which], store, "commit")
        assert compose_ahead(store.directory, repo)
        assert reasoning(store) == afresh(store, repo), (which, mark)


def test_the_settings_the_shim_compares_are_read_in_the_same_git_call(repo: Path):
    """A capture asks git for its settings once: the shim's plain `git config
    --get-regexp` form (which it compares byte for byte) is made from the `-z` form."""
    config = repo / ".git" / "config"
    config.write_text(
        config.read_text()
        + '[obversa]\n\tflag\n\tmaxWhy = 300\n\tmulti = "a\\nb"\n\tempty =\n'
        + '[trailer "Seen-By"]\n\tkey = Seen-by\n[core]\n\tcommentChar = ";"\n'
    )
    plain = git_output(repo, "config", "--get-regexp", CONFIG_PATTERN)
    assert b"obversa.flag\n" in plain and b"trailer.Seen-By.key" in plain
    assert plain_config(config_output(repo)) == plain


def git_output(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True).stdout
