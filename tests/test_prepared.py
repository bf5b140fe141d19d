"""Issue 25 item 4: a capture prepares only its new turns. Composing ahead with a large
pending store costs, on the next capture, a fraction of the first composition, and gives
the message a composition from scratch gives. Real stores in real repositories."""

from __future__ import annotations

import time
from pathlib import Path

from git_obversa.record.composition import (
    COMPOSED,
    compose,
    compose_ahead,
    read_config,
    read_packed,
    unpack,
)
from git_obversa.record.turns import TurnStore
from tests.gitutil import obversa

WORDS = "the retry budget caps how many requests we send again while the gateway fails".split()


def fill(store: TurnStore, megabytes: float) -> int:
    turns, size, number = [], 0, 0
    while size < megabytes * 1e6:
        number += 1
        text = f"Turn {number}: " + " ".join(WORDS[number % 5 :]) + ", because of bursts."
        turns.append({"stage": "commit", "node": "commit", "kind": "engine:text", "text": text})
        size += len(text)
    store.append(turns)
    return number


def reasoning(store: TurnStore) -> str:
    return unpack(read_packed(str(store.directory / COMPOSED)))[4]


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
