"""`pick` (SPEC.md §6.5): rules that always apply, the rest asked about in order and
judged against thresholds, within limits, with the reason it stopped."""

from __future__ import annotations

import json

import pytest

from git_obversa.memory.mechanics import PICK_QUESTION_VERSION, pick, pick_key


def item(source: str, ident: str, role: str = "reference", **extra) -> dict:
    return {
        "sourceId": source,
        "id": ident,
        "role": role,
        "title": ident.title(),
        "text": f"text of {ident}",
        "signals": extra.pop("signals", {}),
        **extra,
    }


def answering(probabilities: dict[str, float], asked: list | None = None):
    def decide(batch):
        if asked is not None:
            asked.append([json.loads(q["key"])[1] for q in batch])
        return {
            q["key"]: {"status": "answered", "probability": probabilities[json.loads(q["key"])[1]]}
            for q in batch
            if json.loads(q["key"])[1] in probabilities
        }

    return decide


def ids(entries) -> list[str]:
    return [entry["id"] for entry in entries]


def test_always_rules_are_selected_without_asking_and_thresholds_judge_the_rest():
    asked: list = []
    result = pick(
        [
            item("a", "always", "rule", applies="always"),
            item("a", "fits"),
            item("a", "weak"),
            item("b", "silent", "rule"),
        ],
        answering({"fits": 0.6, "weak": 0.59}, asked),
    )
    assert ids(result["selected"]) == ["always", "fits"]
    assert result["selected"][0]["reason"] == "always"
    assert ids(result["rejected"]) == ["weak"]
    assert [(e["id"], e["reason"]) for e in result["unanswered"]] == [("silent", "missing")]
    assert result["rulesCoverage"] == "incomplete" and result["stopReason"] is None
    assert "always" not in asked[0] and asked[0][0] == "silent"  # rules are asked first


def test_order_is_signals_per_source_taken_in_turn():
    asked: list = []
    candidates = [
        item("a", "a-low", signals={"recent": 1}),
        item("a", "a-high", signals={"recent": 2, "hits": 3}),
        item("b", "b-only", signals={"hits": 9}),
    ]
    pick(candidates, answering({}, asked))
    assert asked == [["a-high", "b-only", "a-low"]]


def test_limits_time_and_cancel_stop_and_mark_the_rest_unassessed():
    candidates = [item("a", f"n{i}") for i in range(5)]
    everything = {f"n{i}": 0.9 for i in range(5)}
    limited = pick(candidates, answering(everything), max_questions=2)
    assert limited["stopReason"] == "limits" and len(limited["unassessed"]) == 3
    chosen = pick(candidates, answering(everything), max_per_batch=1, max_selected=2)
    assert ids(chosen["selected"]) == ["n0", "n1"] and chosen["stopReason"] == "limits"
    late = pick(candidates, answering(everything), max_seconds=0)
    assert late["stopReason"] == "time" and len(late["unassessed"]) == 5
    stop = pick(candidates, answering(everything), cancelled=lambda: True)
    assert stop["stopReason"] == "cancelled"


def test_questions_are_bounded_and_keyed_and_a_failing_judge_is_an_error():
    long = item("a", "long")
    long["text"] = "x" * 1000
    seen: list = []

    def decide(batch):
        seen.extend(batch)
        raise RuntimeError("judge down")

    result = pick([long, item("r", "rule", "rule")], decide)
    assert seen[0]["version"] == PICK_QUESTION_VERSION
    assert {q["key"] for q in seen} == {pick_key(long), '["r", "rule"]'}
    assert max(len(q["text"]) for q in seen) == 700
    assert {e["reason"] for e in result["unanswered"]} == {"error"}
    assert result["rulesCoverage"] == "incomplete"


def test_bad_input_is_refused():
    with pytest.raises(TypeError):
        pick([{"id": "x"}], answering({}))
    with pytest.raises(TypeError):
        pick([item("a", "x")], answering({}), thresholds=1.5)
    assert pick([], answering({}))["rulesCoverage"] == "complete"
