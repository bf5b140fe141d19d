"""The Why: block format: where it goes in a message file, how it is wrapped, and that a
second run never repeats it. Trailer blocks are judged by the real `git interpret-trailers`."""

from __future__ import annotations

import subprocess

from git_obversa.record.composer import builtin_compose
from git_obversa.record.message import (
    comment_char,
    comment_chars,
    format_block,
    insert_reasoning,
    split_message,
)

EDITOR_TEMPLATE = (
    "\n"
    "# Please enter the commit message for your changes. Lines starting\n"
    "# with '#' will be ignored, and an empty message aborts the commit.\n"
    "#\n"
    "# On branch main\n"
)


def git_trailers(text: str) -> str:
    return subprocess.run(
        ["git", "interpret-trailers", "--parse"], input=text, capture_output=True, text=True
    ).stdout


def is_trailer_block(paragraph: list[str]) -> bool:
    return bool(git_trailers("\n" + "\n".join(paragraph) + "\n").strip())


def insert(text: str, reasoning: str = "Retry twice: the API fails in bursts.", **kwargs) -> str:
    arguments = {"stages": ["implement"], "chars": "#"}
    arguments.update(kwargs)
    return insert_reasoning(
        text, reasoning=reasoning, is_trailer_block=is_trailer_block, **arguments
    )


def test_message_gets_block_then_record_trailer():
    assert insert("Retry API calls\n") == (
        "Retry API calls\n\nWhy:\nRetry twice: the API fails in bursts.\n\n"
        "Obversa-Record: implement\n"
    )


def test_block_goes_above_existing_trailers_which_stay_last_and_parse():
    text = insert("Retry API calls\n\nBody text.\n\nSigned-off-by: A <a@example.com>\nFixes: #12\n")
    assert text == (
        "Retry API calls\n\nBody text.\n\nWhy:\nRetry twice: the API fails in bursts.\n\n"
        "Signed-off-by: A <a@example.com>\nFixes: #12\nObversa-Record: implement\n"
    )
    assert git_trailers(text) == (
        "Signed-off-by: A <a@example.com>\nFixes: #12\nObversa-Record: implement\n"
    )


def test_editor_comments_stay_below_the_block():
    text = insert("Typed subject\n" + EDITOR_TEMPLATE)
    assert text.startswith(
        "Typed subject\n\nWhy:\nRetry twice: the API fails in bursts.\n\n"
        "Obversa-Record: implement\n\n# Please enter"
    )
    assert text.endswith("# On branch main\n")


def test_signoff_in_editor_mode_stays_a_trailer():
    text = insert("Typed subject\n\nSigned-off-by: A <a@example.com>\n" + EDITOR_TEMPLATE)
    assert text.startswith(
        "Typed subject\n\nWhy:\nRetry twice: the API fails in bursts.\n\n"
        "Signed-off-by: A <a@example.com>\nObversa-Record: implement\n\n#"
    )


def test_a_why_block_written_by_hand_is_kept_and_extended_once():
    text = insert("Retry\n\nWhy:\nBursts of two, measured in May.\n")
    assert text == (
        "Retry\n\nWhy:\nBursts of two, measured in May.\n\n"
        "Retry twice: the API fails in bursts.\n\nObversa-Record: implement\n"
    )
    assert insert(text) == text


def test_reasoning_shown_as_comments_is_removed_whole():
    from git_obversa.record.message import comment_lines, remove_lines

    shown = comment_lines(";", "Retry twice", "Why it matters.\n\nSecond.")
    assert all(line.startswith(";") for line in shown)
    assert "; Why:" in shown and ";" in shown and "; Second." in shown
    text = "Typed\n\n" + "".join(line + "\n" for line in shown) + "\n; On branch main\n"
    assert remove_lines(text, shown) == "Typed\n\n; On branch main\n"


def test_scissors_and_diff_stay_below_the_block():
    diff = "# ------------------------ >8 ------------------------\ndiff --git a/x b/x\n+Why:\n"
    text = insert("Subject\n" + EDITOR_TEMPLATE + diff)
    assert text.index("Obversa-Record: implement") < text.index(">8")
    assert text.endswith(diff)


def test_second_run_with_same_reasoning_changes_nothing():
    once = insert("Subject\n\nSigned-off-by: A <a@example.com>\n")
    assert insert(once) == once


def test_amend_with_new_reasoning_extends_the_one_block():
    once = insert("Subject\n")
    twice = insert(once, reasoning="Also cap the delay at two seconds.", stages=["review"])
    assert twice == (
        "Subject\n\nWhy:\nRetry twice: the API fails in bursts.\n\n"
        "Also cap the delay at two seconds.\n\n"
        "Obversa-Record: implement\nObversa-Record: review\n"
    )
    assert twice.count("Why:") == 1


def test_floor_heading_becomes_plain_why_line():
    text = insert("Subject\n", reasoning="## Why\n\nComposition left no message.")
    assert "## Why" not in text
    assert "Why:\nComposition left no message.\n" in text


def test_lines_wrap_at_72_and_never_pass_100():
    words = "retry " * 40
    url = "https://example.com/" + "x" * 150
    block = format_block(f"{words}\n\n- {words}\n{url}", "#")
    assert all(len(line) <= 72 for line in block if not line.startswith("https"))
    assert all(len(line) <= 100 for line in block)
    assert "".join(line for line in block if "x" in line and "retry" not in line) == url
    # A wrapped list item keeps its hanging indent.
    item = block.index(next(line for line in block if line.startswith("- ")))
    assert block[item + 1].startswith("  retry")


def test_no_line_starts_with_the_comment_character():
    reasoning = "#123 is the issue.\n; semicolon start\n$ make test"
    assert format_block(reasoning, "#") == [
        " #123 is the issue.",
        "; semicolon start",
        "$ make test",
    ]
    assert format_block(reasoning, ";") == [
        "#123 is the issue.",
        " ; semicolon start",
        "$ make test",
    ]
    assert format_block(reasoning, comment_chars("auto")) == [
        " #123 is the issue.",
        " ; semicolon start",
        " $ make test",
    ]


def test_auto_comment_char_is_the_one_git_picked():
    # A message with a '#' line made git choose ';' for its comment lines.
    text = "#42 Subject\n\n; Please enter the commit message\n"
    assert comment_char(text, comment_chars("auto")) == ";"
    lines, tail = split_message(text, ";")
    assert lines == ["#42 Subject"] and tail == "; Please enter the commit message\n"
    # Without the editor git added no comment block: the '#' lines are the message's.
    auto = comment_chars("auto")
    assert comment_char("#42 Subject\n", auto, editor=False) == ";"
    assert comment_char("Fix\n\n#42\n;7\n", auto, editor=False) == "@"
    assert comment_char("Fix\r#42\n", auto, editor=False) == ";"  # git counts \r too
    # ... unless they carry git's mark (an editor set to `:`): its hint names the char.
    hint = "Fix\n\n# Please enter the message. Lines starting\n# with '#' will be ignored.\n"
    assert comment_char(hint, auto, editor=False) == "#"
    scissors = "# ------------------------ >8 ------------------------"
    assert comment_char(f"Fix\n\n{scissors}\n#a\ndiff\n", auto, editor=False) == "#"


def test_builtin_composer_scrubs_a_token_split_across_turns_and_never_glues_turns():
    composed = builtin_compose(
        {
            "captured": [
                {"node": "implement", "text": "Chose retries for sk-aaaa"},
                {"node": "implement", "text": "a" * 28 + "   because calls\nfail in bursts."},
                {"node": "implement", "text": "Second, keep the pool."},
            ]
        }
    )
    # Each turn its own paragraph; the split key is whole to the scrubber (issue 12).
    assert composed["body"] == (
        "Chose retries for [redacted]\n\nbecause calls fail in bursts.\n\nSecond, keep the pool."
    )
    assert "aaaa" not in composed["subject"]
