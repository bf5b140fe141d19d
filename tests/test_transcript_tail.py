"""Reading a transcript once (git_obversa.agents.transcript), on real files: only new
complete lines, recovery from truncated or rewritten files, ids remembered across runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from git_obversa.agents.claude_code import is_commit_command
from git_obversa.agents.transcript import UnreadableTranscript, transcript_tail


def entry(number: int, stamp: str | None = None) -> str:
    stamp = stamp or f"2026-11-30T10:{number:02d}:00.000Z"
    return json.dumps({"uuid": f"u{number}", "timestamp": stamp}) + "\n"


def take(state: Path, transcript: Path) -> list[str]:
    """The uuids of the entries not taken before, remembering them as taken."""
    taken = []
    with transcript_tail(state, transcript) as tail:
        for line in tail.lines:
            if isinstance(line.value, dict):
                key, stamp = line.value["uuid"], line.value["timestamp"]
                if not tail.seen.has(key, stamp):
                    tail.seen.add(key, stamp)
                    taken.append(key)
    return taken


@pytest.fixture
def files(tmp_path):
    return tmp_path / "state", tmp_path / "session.jsonl"


def test_only_new_complete_lines_are_handed_over(files):
    state, transcript = files
    transcript.write_text(entry(1) + entry(2) + entry(3)[:10])
    assert take(state, transcript) == ["u1", "u2"]
    assert take(state, transcript) == []
    with open(transcript, "a") as handle:
        handle.write(entry(3)[10:] + entry(4))
    with transcript_tail(state, transcript) as tail:
        assert [line.number for line in tail.lines] == [3, 4]
        assert not tail.recovered


def test_a_truncated_or_rewritten_file_is_read_again_without_repeats(files):
    state, transcript = files
    transcript.write_text(entry(1) + entry(2) + entry(3))
    assert take(state, transcript) == ["u1", "u2", "u3"]
    transcript.write_text(entry(2) + entry(5))  # shorter: compaction rewrote it
    with transcript_tail(state, transcript) as tail:
        assert tail.recovered and [line.number for line in tail.lines] == [1, 2]
        tail.seen.add("u5")
    with open(transcript, "a") as handle:
        handle.write(entry(6))
    assert take(state, transcript) == ["u6"]
    # Same length, different bytes before the cursor: not trusted either.
    rewritten = transcript.read_text().replace("u2", "u7")
    transcript.write_text(rewritten)
    assert take(state, transcript) == ["u7"]


def test_a_replay_with_old_timestamps_is_recognised_in_another_file(files, tmp_path):
    state, transcript = files
    transcript.write_text(entry(1) + entry(2))
    assert take(state, transcript) == ["u1", "u2"]
    resumed = tmp_path / "resumed.jsonl"  # `claude --resume <id> -p` starts a new file
    resumed.write_text(entry(1) + entry(2) + entry(3))
    assert take(state, resumed) == ["u3"]


def test_malformed_lines_are_reported_once_even_after_recovery(files):
    state, transcript = files
    transcript.write_text(entry(1) + "not json\n" + entry(2) + '{"cut": \n')
    with transcript_tail(state, transcript) as tail:
        assert [line.value is None for line in tail.lines] == [False, True, False, True]
        assert tail.malformed == [2, 4]
    transcript.write_text("not json\n" + entry(3))  # rewritten: recovery reads line 1 again
    with transcript_tail(state, transcript) as tail:
        assert [line.value is None for line in tail.lines] == [True, False]
        assert tail.recovered and tail.malformed == []


def test_nothing_moves_when_the_reader_fails(files):
    state, transcript = files
    transcript.write_text(entry(1))
    with pytest.raises(RuntimeError), transcript_tail(state, transcript) as tail:
        tail.seen.add("u1")
        tail.state["kept"] = True
        raise RuntimeError("the agent module failed")
    with transcript_tail(state, transcript) as tail:
        assert [line.number for line in tail.lines] == [1]
        assert not tail.seen.has("u1") and tail.state == {}


def test_state_is_kept_per_transcript(files, tmp_path):
    state, transcript = files
    transcript.write_text(entry(1))
    with transcript_tail(state, transcript) as tail:
        tail.state["response"] = "open"
    other = tmp_path / "other.jsonl"
    other.write_text(entry(2))
    with transcript_tail(state, other) as tail:
        assert tail.state == {}
    with transcript_tail(state, transcript) as tail:
        assert tail.state == {"response": "open"}


def test_an_unreadable_transcript_is_one_clear_error(files):
    state, transcript = files
    with pytest.raises(UnreadableTranscript, match="No such file or directory"):
        with transcript_tail(state, transcript):
            pass


@pytest.mark.parametrize(
    ("command", "commits"),
    [
        ('git commit -m "Fix"', True),
        ('git add -A && git commit -am "Fix"', True),
        ("git -C app -c user.name=x --no-pager commit --amend --no-edit", True),
        ("cd app; git commit", True),
        ("git log --grep commit", False),
        ("git show HEAD:commit.py", False),
        ("echo git commit", False),
        ("python commit.py", False),
    ],
)
def test_which_bash_commands_commit(command, commits):
    assert is_commit_command(command) is commits
