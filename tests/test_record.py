"""The reasoning record (SPEC §7): scenarios 99–116, compose_message, and the persisted
record (`repository=`) shared between processes and kept apart between worktrees."""

from __future__ import annotations

import subprocess
import sys

import pytest

from git_obversa import open_reasoning_record
from git_obversa.record.rules import BODY_LIMIT, compose_message
from git_obversa.record.turns import TurnStore
from tests.gitutil import git

TOKEN = "sk-" + "a" * 32
FLOOR_TAIL = (
    "Composition left no message, so this is the deterministic floor: the\n"
    "stage ended {status} with {turns}. The reasoning for this\n"
    "change was not composed, and the outcome above is what the record can\n"
    "state."
)


def floor_body(status: str, turns: str) -> str:
    return "## Why\n\n" + FLOOR_TAIL.format(status=status, turns=turns)


def text(path, delta, kind="engine:text"):
    return {"kind": kind, "path": list(path), "delta": delta}


class Seen:
    """A composer that remembers what it was given and joins the turns."""

    def __init__(self, subject="feat(implement): the change"):
        self.calls: list[dict] = []
        self.subject = subject

    def __call__(self, request):
        self.calls.append(request)
        joined = "".join(turn["text"] for turn in request["captured"])
        return {"subject": self.subject, "body": "## Why\n\n" + joined}

    def texts(self, call=-1):
        return [turn["text"] for turn in self.calls[call]["captured"]]


def test_scenario_099_path_bound_compose_joins_turns():
    compose = Seen()
    record = open_reasoning_record("implement", path=["delivery", "implement"], compose=compose)
    record.observe(text(["delivery", "implement"], "Retries, because the upstream "))
    record.observe(text(["delivery", "implement"], "fails under load.", "engine:thinking"))
    message = record.message({"status": "pass"})
    assert message["subject"] == "feat(implement): the change"
    assert "fails under load" in message["body"]


def test_scenario_100_composed_subject_and_body_are_scrubbed():
    def compose(request):
        return {
            "subject": f"feat(implement): retry requests using {TOKEN}",
            "body": f"## Why\n\nUsing {TOKEN} keeps retries within the request budget.",
        }

    record = open_reasoning_record("implement", compose=compose)
    assert record.message({"status": "pass"}) == {
        "subject": "feat(implement): retry requests using [redacted]",
        "body": "## Why\n\nUsing [redacted] keeps retries within the request budget.",
    }


def test_scenario_101_token_split_across_turns_compose_sees_raw():
    compose = Seen()
    record = open_reasoning_record("implement", compose=compose)
    first = "Chose retries for sk-aaaa"
    second = "a" * 28 + " because calls fail in bursts."
    record.observe(text(["delivery", "implement"], first))
    record.observe(text(["delivery", "implement"], second, "engine:thinking"))
    message = record.message({"status": "pass"})
    assert compose.calls[0]["captured"] == [
        {"node": "implement", "text": first},
        {"node": "implement", "text": second},
    ]
    assert message["body"] == "## Why\n\nChose retries for [redacted] because calls fail in bursts."


def test_scenario_102_sibling_excluded_with_path():
    compose = Seen()
    record = open_reasoning_record("implement", path=["delivery", "implement"], compose=compose)
    record.observe(text(["delivery", "implement"], "mine"))
    record.observe(text(["delivery", "document"], "sibling"))
    record.observe(text(["delivery", "implement", "write"], "mine too"))
    record.message({"status": "pass"})
    assert compose.texts() == ["mine", "mine too"]


def test_scenario_103_only_text_and_thinking_kept():
    compose = Seen()
    record = open_reasoning_record("implement", compose=compose)
    record.observe(text(["implement"], "kept"))
    record.observe({"kind": "engine:tool", "path": ["implement"], "delta": "tool"})
    record.observe({"kind": "dag:node", "path": ["implement"], "delta": "node"})
    record.observe(text(["implement"], "", "engine:text"))
    record.observe({"kind": "engine:text", "path": ["implement"], "delta": 42})
    record.observe(text(["implement"], "also kept", "engine:thinking"))
    record.message({"status": "pass"})
    assert compose.texts() == ["kept", "also kept"]


def test_scenario_104_unbound_pins_the_first_path_with_the_stage():
    compose = Seen()
    record = open_reasoning_record("implement", compose=compose)
    record.observe(text(["delivery", "implement"], "mine"))
    record.observe(text(["delivery", "document"], "sibling"))
    record.observe(text(["other-run", "implement"], "other run"))
    record.observe(text(["delivery", "implement"], "mine as well"))
    record.message({"status": "pass"})
    assert compose.texts() == ["mine", "mine as well"]


def test_scenario_105_unbound_nested_descendants_included():
    compose = Seen()
    record = open_reasoning_record("implement", compose=compose)
    record.observe(text(["delivery", "implement", "write"], "one"))
    record.observe(text(["delivery", "implement", "write"], "two"))
    record.observe(text(["delivery", "implement", "write", "attempt-2"], "three"))
    record.observe(text(["delivery", "document", "write"], "sibling"))
    record.observe(text(["other-run", "implement", "write"], "other run"))
    record.message({"status": "pass"})
    assert compose.texts() == ["one", "two", "three"]
    assert [turn["node"] for turn in compose.calls[0]["captured"]] == [
        "write",
        "write",
        "attempt-2",
    ]


def test_scenario_106_long_body_is_bounded():
    record = open_reasoning_record(
        "implement", compose=lambda r: {"subject": "feat: long", "body": "x" * 40000}
    )
    body = record.message({"status": "pass"})["body"]
    assert len(body) < 20000
    assert "body truncated" in body


def test_scenario_107_scrub_before_bound_exact_output():
    prefix = "p" * 15993 + " "  # 15994 ordinary characters; the key starts a word
    record = open_reasoning_record(
        "implement",
        compose=lambda r: {"subject": "feat: cut", "body": prefix + TOKEN + " and more text"},
    )
    body = record.message({"status": "pass"})["body"]
    assert body == prefix + "[redac\n\n[record: body truncated at 16000 characters]"
    assert "sk-" not in body


def test_scenario_107_bound_counts_code_points():
    # DESIGN.md: characters are str length; an astral character is one and is never split.
    body = "😀" * (BODY_LIMIT + 5)
    message = compose_message("s", [], {"status": "pass"}, lambda r: {"subject": "s", "body": body})
    assert message["body"] == "😀" * BODY_LIMIT + "\n\n[record: body truncated at 16000 characters]"


def test_scenario_108_multiline_subject_falls_to_floor():
    record = open_reasoning_record(
        "implement", compose=lambda r: {"subject": "feat: one\ntwo", "body": "why"}
    )
    assert record.message({"status": "pass", "summary": "done"})["subject"] == (
        "record(implement): done"
    )
    carriage = open_reasoning_record(
        "implement", compose=lambda r: {"subject": "feat: one\rtwo", "body": "why"}
    )
    assert carriage.message({"status": "pass"})["subject"] == "record(implement): pass"


def test_scenario_109_floor_subject_collapses_whitespace():
    record = open_reasoning_record("implement")
    message = record.message({"status": "pass", "summary": "built the thing\nover two lines"})
    assert message["subject"] == "record(implement): built the thing over two lines"


def test_scenario_110_committed_clears_turns():
    compose = Seen()
    record = open_reasoning_record("implement", compose=compose)
    record.observe(text(["implement"], "first"))
    record.message({"status": "pass"})
    record.committed("abc1234")
    record.observe(text(["implement"], "second"))
    record.message({"status": "pass"})
    assert compose.texts(0) == ["first"]
    assert compose.texts(1) == ["second"]


def test_scenario_111_compose_returns_none_nothing_observed():
    record = open_reasoning_record("implement", compose=lambda r: None)
    assert "0 captured turns" in record.message({"status": "pass"})["body"]


def test_scenario_112_compose_raises():
    def compose(request):
        raise RuntimeError("model unavailable")

    record = open_reasoning_record("implement", compose=compose)
    message = record.message({"status": "pass", "summary": "the stage finished anyway"})
    assert "implement" in message["subject"]
    assert "the stage finished anyway" in message["subject"]
    assert "deterministic floor" in message["body"]


def test_scenario_113_blank_composition_is_floor():
    record = open_reasoning_record("implement", compose=lambda r: {"subject": "   ", "body": ""})
    assert record.message({"status": "fail"})["subject"] == "record(implement): fail"


@pytest.mark.parametrize(
    "compose",
    [
        None,
        lambda r: 1 / 0,
        lambda r: {"subject": "ok", "body": "   "},
        lambda r: {"subject": 3, "body": "why"},
        lambda r: "just a string",
    ],
    ids=["no-composer", "raising", "blank-body", "subject-not-str", "not-a-dict"],
)
def test_scenario_114_floor_exact(compose):
    record = open_reasoning_record("implement", compose=compose)
    record.observe(text(["implement"], "configured it"))
    message = record.message({"status": "pass", "summary": f"configured {TOKEN} for retries"})
    assert message == {
        "subject": "record(implement): configured [redacted] for retries",
        "body": floor_body("pass", "1 captured turn"),
    }
    assert message["body"].count("\n") == 5


def test_scenario_115_message_twice_same_turns():
    compose = Seen()
    record = open_reasoning_record("implement", compose=compose)
    record.observe(text(["implement"], "2 turns: one, "))
    record.observe(text(["implement"], "two"))
    first = record.message({"status": "pass"})
    second = record.message({"status": "pass"})
    assert "2 turns" in first["body"] and "2 turns" in second["body"]
    assert first == second
    assert len(compose.calls) == 2
    floor = open_reasoning_record("implement")
    floor.observe(text(["implement"], "a"))
    floor.observe(text(["implement"], "b"))
    assert "2 captured turns" in floor.message({"status": "pass"})["body"]


@pytest.mark.parametrize("stage", ["  ", "", None, 3])
def test_scenario_116_blank_stage_is_a_type_error(stage):
    with pytest.raises(TypeError, match="stage must be a non-empty string"):
        open_reasoning_record(stage)


def test_compose_receives_a_copy_and_the_raw_outcome():
    captured = [{"node": "implement", "text": f"uses {TOKEN}"}]

    def compose(request):
        request["captured"][0]["text"] = "mutated"
        request["captured"].append({"node": "x", "text": "y"})
        assert request["outcome"]["summary"] == f"raw {TOKEN}"
        return None

    message = compose_message(
        "implement", captured, {"status": "pass", "summary": f"raw {TOKEN}"}, compose
    )
    assert captured == [{"node": "implement", "text": f"uses {TOKEN}"}]
    assert message["subject"] == "record(implement): raw [redacted]"


def test_empty_summary_is_not_replaced_by_status():
    assert compose_message("s", [], {"status": "pass", "summary": ""})["subject"] == "record(s):"


def test_async_composer_is_awaited():
    async def compose(request):
        return {"subject": "feat: async", "body": "because"}

    assert compose_message("s", [], {"status": "pass"}, compose) == {
        "subject": "feat: async",
        "body": "because",
    }


# --- the persisted record (repository=) ---------------------------------------------------


def test_persisted_turns_are_visible_to_another_process(repo):
    record = open_reasoning_record("implement", repository=repo)
    record.observe(text(["implement"], "Chose a queue because bursts overflow."))
    script = (
        "import json, sys\n"
        "from git_obversa.record.turns import TurnStore\n"
        "print(json.dumps(TurnStore.for_worktree(sys.argv[1]).read()))\n"
    )
    seen = subprocess.run(
        [sys.executable, "-c", script, str(repo)], capture_output=True, text=True, check=True
    ).stdout
    assert "Chose a queue because bursts overflow." in seen
    assert '"stage": "implement"' in seen and '"kind": "engine:text"' in seen


def test_persisted_message_composes_turns_from_other_processes(repo):
    subprocess.run(
        ["git", "obversa", "record", "note", "--stage", "implement", "noted from the shell"],
        cwd=repo,
        check=True,
    )
    compose = Seen()
    record = open_reasoning_record("implement", compose=compose, repository=repo)
    record.observe(text(["implement"], "observed in process"))
    other_stage = open_reasoning_record("document", repository=repo)
    other_stage.observe(text(["document"], "another stage"))
    record.message({"status": "pass"})
    assert compose.texts() == ["noted from the shell", "observed in process"]


def test_persisted_committed_clears_only_what_message_used(repo):
    compose = Seen()
    record = open_reasoning_record("implement", compose=compose, repository=repo)
    record.observe(text(["implement"], "first"))
    record.message({"status": "pass"})
    record.observe(text(["implement"], "arrived after the message"))
    open_reasoning_record("document", repository=repo).observe(text(["document"], "other"))
    record.committed("abc1234")
    left = [(turn["stage"], turn["text"]) for turn in TurnStore.for_worktree(repo).read()]
    assert left == [("implement", "arrived after the message"), ("document", "other")]
    record.message({"status": "pass"})
    assert compose.texts() == ["arrived after the message"]


def test_persisted_turns_kept_without_committed(repo):
    record = open_reasoning_record("implement", repository=repo)
    record.observe(text(["implement"], "kept for a retry"))
    record.message({"status": "pass"})
    again = open_reasoning_record("implement", repository=repo)
    assert "1 captured turn." in again.message({"status": "pass"})["body"]


def test_two_worktrees_never_see_each_others_turns(repo, tmp_path):
    other = tmp_path / "other"
    git(repo, "worktree", "add", "-q", "-b", "side", str(other))
    (other / "sub").mkdir()
    compose_main, compose_side = Seen(), Seen()
    main = open_reasoning_record("implement", compose=compose_main, repository=repo)
    side = open_reasoning_record("implement", compose=compose_side, repository=other / "sub")
    main.observe(text(["implement"], "main's reason"))
    side.observe(text(["implement"], "side's reason"))
    main.message({"status": "pass"})
    side.message({"status": "pass"})
    assert compose_main.texts() == ["main's reason"]
    assert compose_side.texts() == ["side's reason"]
    main.committed("abc")
    assert [turn["text"] for turn in TurnStore.for_worktree(other).read()] == ["side's reason"]


def test_persisted_record_outside_a_repository_fails_clearly(tmp_path):
    with pytest.raises(ValueError, match="is not a Git repository"):
        open_reasoning_record("implement", repository=tmp_path)


def note(store: TurnStore, *texts: str, stage: str = "implement") -> list[dict]:
    return store.append(
        [{"stage": stage, "node": stage, "kind": "engine:text", "text": t} for t in texts]
    )


def test_claimed_turns_stay_pending_and_later_turns_are_apart(repo):
    store = TurnStore.for_worktree(repo)
    note(store, "first", "second")
    assert [turn["text"] for turn in store.claim()] == ["first", "second"]
    note(store, "while the commit is in the editor")
    assert [turn["text"] for turn in store.read()] == [
        "first",
        "second",
        "while the commit is in the editor",
    ]
    # What post-commit's `rm` of the claimed file leaves: exactly the later turn.
    store.claimed_file.unlink()
    assert [turn["text"] for turn in store.read()] == ["while the commit is in the editor"]


def test_a_claim_cut_short_counts_each_turn_once(repo):
    store = TurnStore.for_worktree(repo)
    note(store, "only once")
    store.claimed_file.write_text(store.turns_file.read_text())  # both files hold it
    assert [turn["text"] for turn in store.read()] == ["only once"]
    assert [turn["seq"] for turn in note(store, "next")] == [2]


def test_clear_keeps_claimed_turns_in_the_claimed_file(repo):
    store = TurnStore.for_worktree(repo)
    note(store, "implement's", stage="implement")
    note(store, "review's", stage="review")
    store.claim()
    note(store, "later review", stage="review")
    assert store.clear(stage="review") == 2
    assert [turn["text"] for turn in store.read()] == ["implement's"]
    store.claimed_file.unlink()
    assert store.read() == []


def test_a_seq_file_cut_short_does_not_restart_numbering(repo):
    store = TurnStore.for_worktree(repo)
    note(store, "one", "two")
    (store.directory / "seq").write_text("")  # a write interrupted after truncation
    assert [turn["seq"] for turn in note(store, "three")] == [3]


def test_a_claim_of_some_turns_takes_whole_blocks_and_leaves_the_rest(repo):
    store = TurnStore.for_worktree(repo)
    store.append(
        [
            {"stage": "s", "node": "s", "kind": "engine:text", "text": "Re", "block": "b1"},
            {"stage": "s", "node": "s", "kind": "engine:text", "text": "try", "block": "b1"},
            {"stage": "s", "node": "s", "kind": "note", "text": "Alone."},
            {"stage": "s", "node": "s", "kind": "note", "text": "Later."},
        ]
    )
    joined = store.read()
    assert [turn["text"] for turn in joined] == ["Retry", "Alone.", "Later."]
    claimed = store.claim({joined[0]["seq"], joined[1]["seq"]})
    assert [turn["text"] for turn in claimed] == ["Retry", "Alone."]
    assert [turn["text"] for turn in store.read()] == ["Retry", "Alone.", "Later."]
    store.claimed_file.unlink()  # what post-commit does once the commit carries them
    assert [turn["text"] for turn in store.read()] == ["Later."]
