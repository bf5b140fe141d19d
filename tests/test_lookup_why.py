"""Blame lookup on real histories: `why(...)` and `parse_reasoning(...)`."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import git_obversa
from git_obversa.lookup import blame
from git_obversa.lookup.why import (
    Annotation,
    BlamedCommit,
    BlamedLine,
    BlameError,
    Commit,
    annotate,
    parse_reasoning,
    reasoned_log,
    why,
)
from git_obversa.record import message
from tests.gitutil import git

HOOK_MESSAGE = """\
Retry requests

The client gave up after the first failure.

Why:
Calls fail in bursts of two, so three attempts cover a burst and one
real failure.

The back-off stays short because callers wait on us.

Signed-off-by: A U Thor <author@example.com>
Obversa-Record: implement
"""

FLOOR_MESSAGE = """\
record(implement): pass

## Why

Composition left no message, so this is the deterministic floor: the
stage ended pass with 1 captured turn. The reasoning for this
change was not composed, and the outcome above is what the record can
state.
"""


def commit(repo: Path, message: str, **files: str) -> str:
    """Write FILES (name -> text; None deletes), commit with MESSAGE via -F, return the sha."""
    for name, text in files.items():
        path = repo / name.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        git(repo, "add", str(path))
    git(repo, "commit", "-q", "--allow-empty", "-F", "-", input=message)
    return git(repo, "rev-parse", "HEAD").strip()


def reason(subject: str, text: str) -> str:
    return f"{subject}\n\nWhy:\n{text}\n\nObversa-Record: implement\n"


def owners(repo: Path, path: str, *args, **kwargs) -> list[tuple[str, tuple, str | None]]:
    return [(c.subject, c.ranges, c.reasoning) for c in why(repo, path, *args, **kwargs)]


# --- parse_reasoning -------------------------------------------------------------------


def test_parse_reads_the_hook_block_without_trailers():
    assert parse_reasoning(HOOK_MESSAGE) == (
        "Calls fail in bursts of two, so three attempts cover a burst and one\n"
        "real failure.\n\nThe back-off stays short because callers wait on us."
    )


def test_parse_reads_a_floor_body_written_with_commit_F():
    assert parse_reasoning(FLOOR_MESSAGE).startswith("Composition left no message")
    assert parse_reasoning(FLOOR_MESSAGE).endswith("what the record can\nstate.")


def test_parse_legacy_section_ends_at_the_next_heading():
    message = "s\n\n## Why\n\nBecause.\n\n## Testing\n\nRan it.\n"
    assert parse_reasoning(message) == "Because."


def test_parse_prefers_the_hook_block_over_a_legacy_section():
    message = "s\n\n## Why\n\nold floor\n\nWhy:\nfresh reasoning\n\nObversa-Record: x\n"
    assert parse_reasoning(message) == "fresh reasoning"


def test_parse_without_reasoning_is_none():
    assert parse_reasoning("fix typo\n") is None
    assert parse_reasoning("fix\n\nbody text\n\nSigned-off-by: A <a@b.c>\n") is None
    assert parse_reasoning("fix\n\nWhy:\n\nObversa-Record: x\n") is None


def test_parse_keeps_a_trailer_like_paragraph_inside_the_reasoning():
    message = "s\n\nWhy:\nFirst.\n\nDecision: keep the cache\n\nLast.\n\nObversa-Record: x\n"
    assert parse_reasoning(message) == "First.\n\nDecision: keep the cache\n\nLast."


def test_parse_drops_a_cherry_pick_line_and_handles_crlf():
    message = HOOK_MESSAGE + "(cherry picked from commit 0123456789abcdef)\n"
    assert parse_reasoning(message) == parse_reasoning(HOOK_MESSAGE)
    assert parse_reasoning(HOOK_MESSAGE.replace("\n", "\r\n")) == parse_reasoning(HOOK_MESSAGE)
    plain = "s\n\nWhy:\nbecause\n\n(cherry picked from commit 0123456789abcdef)\n"
    assert parse_reasoning(plain) == "because"


def test_parse_squash_message_returns_every_record_in_order():
    # What `git merge --squash` writes: each squashed message indented by four spaces.
    message = (
        "Squashed commit of the following:\n\ncommit 1111\nAuthor: A <a@b.c>\n"
        "Date:   today\n\n    second\n\n    Why:\n    reason two\n    goes on\n\n"
        "    Obversa-Record: implement\n\ncommit 2222\nAuthor: A <a@b.c>\nDate:   today\n\n"
        "    first\n\n    Why:\n    reason one\n\n    Obversa-Record: implement\n"
    )
    assert parse_reasoning(message) == "reason two\ngoes on\n\nreason one"


def test_parse_concatenated_messages_of_a_rebase_squash():
    # `rebase -i` squash joins whole messages: the first record's trailers close its block.
    message = reason("first", "reason one") + "\n" + reason("second", "reason two")
    assert parse_reasoning(message) == "reason one\n\nreason two"


# --- why on real histories -------------------------------------------------------------


def test_why_groups_lines_by_commit_in_line_order(repo):
    first = commit(repo, reason("Add client", "The client needs a base."), **{"a.py": "1\n2\n3\n"})
    second = commit(repo, "Tweak line two\n\nJust a body.\n", **{"a.py": "1\ntwo\n3\n4\n"})
    result = why(repo, "a.py")
    assert [c.commit for c in result] == [first, second]
    assert [c.ranges for c in result] == [((1, 1), (3, 3)), ((2, 2), (4, 4))]
    assert result[0].reasoning == "The client needs a base."
    assert result[0].author == "Test Author" and result[0].email == "author@example.com"
    assert result[0].date[:4].isdigit() and "T" in result[0].date
    assert (result[1].subject, result[1].reasoning, result[1].body) == (
        "Tweak line two",
        None,
        "Just a body.",
    )
    assert owners(repo, "a.py", 2, 3) == [
        ("Tweak line two", ((2, 2),), None),
        ("Add client", ((3, 3),), "The client needs a base."),
    ]


def test_why_follows_renames(repo):
    commit(repo, reason("Add", "Written for the parser."), **{"old.py": "a\nb\n"})
    git(repo, "mv", "old.py", "new.py")
    commit(repo, "Rename\n")
    [owner] = why(repo, "new.py")
    assert owner.reasoning == "Written for the parser."
    assert owner.paths == ("old.py",)


def test_why_follows_moves_and_copies_when_asked(repo):
    helpers = "".join(f"def helper_{n}(value):\n    return value * {n}\n" for n in range(4))
    checks = "".join(f"def check_{n}(value):\n    assert value > {n}, value\n" for n in range(4))
    commit(repo, reason("Add helpers", "Helpers keep callers short."), **{"a.py": helpers})
    commit(repo, reason("Add checks", "Checks fail early."), **{"a.py": helpers + checks})
    commit(repo, "Reorder\n", **{"a.py": checks + helpers})
    assert "Reorder" in {c.subject for c in why(repo, "a.py")}
    assert owners(repo, "a.py", moves=True) == [
        ("Add checks", ((1, 8),), "Checks fail early."),
        ("Add helpers", ((9, 16),), "Helpers keep callers short."),
    ]
    # Copied into a new file by a commit that also changes the source file.
    commit(repo, "Copy helpers\n", **{"b.py": helpers, "a.py": checks + helpers + "\n"})
    assert {c.subject for c in why(repo, "b.py")} == {"Copy helpers"}
    [copied] = why(repo, "b.py", copies=1)
    assert (copied.subject, copied.paths) == ("Add helpers", ("a.py",))


def test_why_through_merges(repo):
    commit(repo, "Base\n", **{"f.txt": "top\nmiddle\nbottom\n"})
    git(repo, "checkout", "-q", "-b", "side")
    commit(repo, reason("Side edit", "Top must say hello."), **{"f.txt": "hello\nmiddle\nbottom\n"})
    git(repo, "checkout", "-q", "main")
    commit(repo, reason("Main edit", "Bottom says bye."), **{"f.txt": "top\nmiddle\nbye\n"})
    git(repo, "merge", "-q", "--no-ff", "-m", "Merge side", "side")
    assert owners(repo, "f.txt") == [
        ("Side edit", ((1, 1),), "Top must say hello."),
        ("Base", ((2, 2),), None),
        ("Main edit", ((3, 3),), "Bottom says bye."),
    ]
    # A conflict resolved in the merge belongs to the merge commit, which records nothing.
    git(repo, "checkout", "-q", "-b", "other", "HEAD~1")
    commit(repo, "Other\n", **{"f.txt": "top\nother\nbottom\n"})
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "other", check=False)
    (repo / "f.txt").write_text("hello\nresolved\nbye\n")
    git(repo, "commit", "-qam", "Merge other")
    assert owners(repo, "f.txt", 2, 2) == [("Merge other", ((2, 2),), None)]


def test_amended_commit_carries_the_amended_reasoning(repo):
    old = commit(repo, reason("Add", "First thought."), **{"f.txt": "x\n"})
    git(repo, "commit", "-q", "--amend", "-F", "-", input=reason("Add", "Second thought."))
    [owner] = why(repo, "f.txt")
    assert owner.commit != old and owner.reasoning == "Second thought."


def test_reasoning_follows_rebased_and_cherry_picked_lines(repo):
    commit(repo, "Base\n", **{"f.txt": "a\nb\n-\n-\nc\n"})
    git(repo, "checkout", "-q", "-b", "topic")
    picked = commit(repo, reason("Change b", "b was wrong."), **{"f.txt": "a\nB\n-\n-\nc\n"})
    git(repo, "checkout", "-q", "main")
    commit(repo, reason("Change c", "c was wrong."), **{"f.txt": "a\nb\n-\n-\nC\n"})
    git(repo, "checkout", "-q", "topic")
    git(repo, "rebase", "-q", "main")
    assert [c for c in owners(repo, "f.txt") if c[2]] == [
        ("Change b", ((2, 2),), "b was wrong."),
        ("Change c", ((5, 5),), "c was wrong."),
    ]
    assert why(repo, "f.txt", 2, 2)[0].commit != picked
    git(repo, "checkout", "-q", "main")
    git(repo, "cherry-pick", "-x", picked)
    [owner] = why(repo, "f.txt", 2, 2)
    assert owner.reasoning == "b was wrong."
    assert "cherry picked from" in owner.body


def test_squash_merge_holds_several_records(repo):
    git(repo, "checkout", "-q", "-b", "feature")
    commit(repo, reason("One", "Reason one."), **{"f.txt": "one\n"})
    commit(repo, reason("Two", "Reason two."), **{"f.txt": "one\ntwo\n"})
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--squash", "feature")
    git(repo, "commit", "-q", "--no-edit")
    [owner] = why(repo, "f.txt")
    assert owner.subject == "Squashed commit of the following:"
    assert owner.reasoning == "Reason two.\n\nReason one."


def test_legacy_section_from_a_record_commit(repo):
    commit(repo, FLOOR_MESSAGE, **{"f.txt": "x\n"})
    [owner] = why(repo, "f.txt")
    assert owner.reasoning.startswith("Composition left no message, so this")


def test_blame_ignore_revs_file_is_honoured(repo):
    commit(repo, reason("Add", "Why the values are these."), **{"f.txt": "a = 1\nb = 2\n"})
    reformat = commit(repo, "Reformat\n", **{"f.txt": "a=1\nb=2\n"})
    assert owners(repo, "f.txt")[0][0] == "Reformat"
    (repo / ".git-blame-ignore-revs").write_text(reformat + "\n")
    git(repo, "config", "blame.ignoreRevsFile", ".git-blame-ignore-revs")
    assert owners(repo, "f.txt") == [("Add", ((1, 2),), "Why the values are these.")]


def test_crlf_lines(repo):
    git(repo, "config", "core.autocrlf", "false")
    (repo / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    git(repo, "add", "w.txt")
    git(repo, "commit", "-q", "-F", "-", input=reason("CRLF", "Windows tools write it."))
    annotation = annotate(repo, "w.txt", 2, 3)
    assert [(line.number, line.text) for line in annotation.lines] == [(2, "two"), (3, "three")]
    [owner] = annotation.commits.values()
    assert owner.ranges == ((2, 3),) and owner.reasoning == "Windows tools write it."


def test_ranges_past_the_end(repo):
    commit(repo, reason("Add", "Three lines."), **{"f.txt": "1\n2\n3\n"})
    assert owners(repo, "f.txt", 2, 99) == [("Add", ((2, 3),), "Three lines.")]
    with pytest.raises(BlameError, match="f.txt has only 3 lines; line 4 is past the end"):
        why(repo, "f.txt", 4, 10)


def test_errors_are_one_line(repo, tmp_path):
    (repo / "b.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01")
    git(repo, "add", "b.png")
    git(repo, "commit", "-qm", "image")
    with pytest.raises(BlameError, match="b.png is a binary file"):
        why(repo, "b.png")
    with pytest.raises(BlameError, match="missing.txt is not a file in HEAD"):
        why(repo, "missing.txt")
    with pytest.raises(BlameError, match="outside repository"):
        why(repo, str(tmp_path))
    with pytest.raises(BlameError, match="is not a revision"):
        why(repo, "README.md", rev="--all")
    with pytest.raises(ValueError):
        why(repo, "README.md", 3, 2)


def test_reasoned_log_lists_reasoning_newest_first(repo):
    commit(repo, reason("Old", "Old reason."), **{"a.txt": "a\n"})
    commit(repo, "Plain\n", **{"b.txt": "b\n"})
    commit(repo, FLOOR_MESSAGE, **{"b.txt": "bb\n"})
    commit(repo, reason("New", "New reason."), **{"a.txt": "aa\n"})
    assert [c.subject for c in reasoned_log(repo)] == ["New", "record(implement): pass", "Old"]
    assert [c.subject for c in reasoned_log(repo, limit=1)] == ["New"]
    assert [c.reasoning for c in reasoned_log(repo, ["a.txt"])] == ["New reason.", "Old reason."]


# --- the Python API's shape ------------------------------------------------------------


def test_the_api_returns_frozen_dataclasses(repo):
    sha = commit(repo, reason("Add", "Two lines, one reason."), **{"f.txt": "a\nb\n"})
    [owner] = why(repo, "f.txt")
    assert dataclasses.is_dataclass(owner) and type(owner) is BlamedCommit
    names = "commit author email date subject body reasoning ranges paths agents unattributed"
    names = names.split()
    assert [field.name for field in dataclasses.fields(owner)] == names
    assert (owner.commit, owner.ranges, owner.paths) == (sha, ((1, 2),), ("f.txt",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        owner.reasoning = "something else"
    assert why(repo, "f.txt") == [owner]  # compared by value
    assert dataclasses.replace(owner, ranges=((2, 2),)) == why(repo, "f.txt", 2, 2)[0]
    assert owner.to_json()["ranges"] == [[1, 2]] and owner.to_json()["paths"] == ["f.txt"]

    annotation = annotate(repo, "f.txt")
    assert type(annotation) is Annotation and dataclasses.is_dataclass(annotation)
    assert annotation.lines == [BlamedLine(1, sha, "a"), BlamedLine(2, sha, "b")]
    assert annotation.commits == {sha: owner}

    [logged] = reasoned_log(repo)
    assert type(logged) is Commit and dataclasses.is_dataclass(logged)
    with pytest.raises(dataclasses.FrozenInstanceError):
        logged.subject = "other"
    assert logged.to_json() == {
        key: value
        for key, value in owner.to_json().items()
        if key not in ("ranges", "paths", "agents", "unattributed")
    }


def test_parse_reasoning_and_blame_error_are_one_each():
    # The reader lives beside the hook's writer; the API and the package re-export it.
    assert parse_reasoning is message.parse_reasoning is git_obversa.parse_reasoning
    assert BlameError is blame.BlameError
