"""Issue 10 items 5-7 on real `git commit` / `git revert`: bounds that lose nothing, git's
own behaviour kept, linear cost, fail-open shims, process groups, comment characters and
encodings. Helpers are shared with test_hook_e2e."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import time
from pathlib import Path

import pytest

from tests.gitutil import git, obversa
from tests.test_hook_e2e import (
    REASON,
    capture,
    change,
    commit,
    editor_script,
    message,
    path_without_git_obversa,
    pending,
    trailers,
    write_composer,
)

FILLER = "The gateway log shows the same line again and again. "


@pytest.fixture
def hooked(repo: Path) -> Path:
    completed = obversa("install", cwd=repo)
    assert completed.returncode == 0, completed.stderr
    return repo


# -- item 5: bounds without loss ---------------------------------------------------------


def test_one_oversized_turn_never_pushes_the_others_out(hooked):
    capture(hooked, FILLER * 4000)  # about 200 KB
    capture(hooked, REASON)
    change(hooked)
    assert commit(hooked, "-m", "Retry").returncode == 0
    body = message(hooked)
    assert REASON in body
    assert len(body) < 3000
    assert pending(hooked) == []


def test_the_floor_bounds_each_turn_and_keeps_what_does_not_fit_in_the_record(hooked, tmp_path):
    git(hooked, "config", "obversa.composer", write_composer(tmp_path, "import sys; sys.exit(1)"))
    big = [f"Turn {n} begins. " + FILLER * 80 + f"Turn {n} ends." for n in range(6)]
    capture(hooked, *big)  # each about 4,300 characters: six do not fit in 16,000
    change(hooked)
    completed = commit(hooked, "-m", "Retry")
    assert completed.returncode == 0, completed.stderr
    first = " ".join(message(hooked).split())  # wrapping aside
    assert "characters left out" in first  # each turn cut to its head and tail
    carried = [n for n in range(6) if f"Turn {n} begins." in first]
    assert carried == list(range(len(carried))) and 3 <= len(carried) < 6
    assert all(f"Turn {n} ends." in first for n in carried)
    left = 6 - len(carried)
    assert f"[… {left} more turn{'s' if left > 1 else ''} in the kept record: git obversa" in first
    assert len(first) < 16500
    assert pending(hooked) == []  # nothing said about this commit waits for the next
    shown = obversa("record", "show", "HEAD", "--json", cwd=hooked)
    kept = [turn["text"] for turn in json.loads(shown.stdout)["turns"]]
    assert [n for n in range(6) if any(f"Turn {n} begins." in text for text in kept)] == [
        0, 1, 2, 3, 4, 5
    ]  # fmt: skip


def test_a_turn_is_cut_at_whitespace_never_mid_word(hooked, tmp_path):
    git(hooked, "config", "obversa.composer", write_composer(tmp_path, "import sys; sys.exit(1)"))
    capture(hooked, " ".join(f"word{n:06d}" for n in range(30000)))
    change(hooked)
    assert commit(hooked, "-m", "Retry").returncode == 0
    body = message(hooked).split("Why:\n", 1)[1].split("\n\nObversa-Record")[0]
    words = body.replace("\n", " ").split()
    marker = words.index("[…")
    # No sentence end to cut at: the broken sentence says so on both sides of the marker.
    assert words[marker - 1] == "…" and words[marker + 6] == "…"
    assert all(len(word) == 10 for word in words[: marker - 1])
    assert words[marker + 2 : marker + 6] == ["characters", "left", "out", "…]"]
    assert all(len(word) == 10 for word in words[marker + 7 :])
    assert words[-1] == "word029999"


# -- item 6: git's own behaviour ------------------------------------------------------


@pytest.mark.parametrize("mode", ["no-edit", "editor", "no-commit", "two-commits"])
def test_revert_in_any_mode_is_left_alone_and_turns_stay(hooked, tmp_path, mode):
    for name in ("a.txt", "b.txt"):
        change(hooked, name)
        git(hooked, "commit", "-q", "-m", f"add {name}")
    capture(hooked, REASON)
    if mode == "no-edit":
        git(hooked, "revert", "--no-edit", "HEAD")
    elif mode == "editor":
        editor = editor_script(tmp_path, "true")
        git(hooked, "-c", f"core.editor={editor}", "revert", "--edit", "HEAD")
    elif mode == "no-commit":
        git(hooked, "revert", "--no-commit", "HEAD")
        assert commit(hooked, "--no-edit").returncode == 0
    else:
        git(hooked, "revert", "--no-edit", "HEAD~1..HEAD", "HEAD~2..HEAD~1")
    assert "Why:" not in git(hooked, "log", "-3", "--format=%B")
    assert message(hooked).startswith('Revert "add ')
    assert pending(hooked) == [REASON]


def test_why_is_never_the_subject_even_when_a_note_starts_with_the_comment_character(hooked):
    capture(hooked, "#42 keeps failing because the gateway sends 0 in Retry-After.", kind="note")
    change(hooked)
    # With -m, git keeps '#42 ...' as the subject (whitespace cleanup); nothing is added.
    assert commit(hooked, "-m", "#42 Retry").returncode == 0
    assert message(hooked) == "#42 Retry\n"
    assert pending(hooked) != []
    change(hooked, text="again = 1\n")
    # An empty message allowed on purpose stays empty: Why: never becomes its subject.
    assert commit(hooked, "--allow-empty-message", "-m", "").returncode == 0
    assert message(hooked) == ""
    change(hooked, text="third = 1\n")
    assert commit(hooked, "-m", "Retry").returncode == 0
    assert message(hooked) == (
        "Retry\n\nWhy:\n #42 keeps failing because the gateway sends 0 in Retry-After.\n\n"
        "Obversa-Record: implement\n"
    )


# -- item 7: linear, bounded, fail-open ----------------------------------------------------


def timed_commit(cwd: Path, *args: str) -> float:
    """CPU seconds `git commit` and its hooks took: wall time on this shared machine
    measures the other tenants."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    completed = commit(cwd, *args)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert completed.returncode == 0, completed.stderr
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


@pytest.mark.parametrize("shape", ["10,000 turns", "1 MB turn"])
def test_composition_is_linear_in_what_is_pending(hooked, shape):
    change(hooked, "warm.txt")
    plain = timed_commit(hooked, "-m", "plain")  # the same hooks, nothing pending
    if shape == "10,000 turns":
        capture(hooked, *(f"Turn {n}: retry because the gateway bursts." for n in range(10000)))
    else:
        capture(hooked, "Retry because the gateway bursts. " * 30000)
    change(hooked)
    added = timed_commit(hooked, "-m", "Retry") - plain
    assert "Why:\n" in message(hooked)
    assert pending(hooked) == []
    assert added < 1.0, f"{shape} added {added:.2f} s of CPU"


def stale_git_obversa(tmp_path: Path) -> str:
    """PATH with a git-obversa whose virtual environment is gone (a stale shebang)."""
    folder = tmp_path / "stale-bin"
    folder.mkdir()
    script = folder / "git-obversa"
    script.write_text(f"#!{tmp_path}/gone-venv/bin/python\nimport sys\n")
    script.chmod(0o755)
    return f"{folder}{os.pathsep}{path_without_git_obversa()}"


@pytest.mark.parametrize("no_verify", [False, True], ids=["verify", "no-verify"])
def test_a_git_obversa_that_cannot_start_never_blocks_a_commit(hooked, tmp_path, no_verify):
    # The runtime install wrote names an interpreter that is gone too: PATH is asked.
    runtime = hooked / ".git" / "hooks" / "obversa-runtime"
    runtime.write_text(f"{tmp_path}/gone-venv/bin/python\n{runtime.read_text().splitlines()[1]}\n")
    capture(hooked, REASON)
    change(hooked)
    flags = ["--no-verify"] if no_verify else []
    env = {"PATH": stale_git_obversa(tmp_path)}
    completed = commit(hooked, *flags, "-m", "Retry", env=env)
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr == (
        f"warning: git-obversa cannot start: its interpreter {tmp_path}/gone-venv/bin/python "
        "is gone; the commit proceeds without reasoning\n"
    )
    assert len(completed.stderr.strip().splitlines()) == 1
    assert message(hooked) == "Retry\n" and pending(hooked) == [REASON]
    git(hooked, "config", "obversa.strict", "true")
    change(hooked, text="again = 1\n")
    stopped = commit(hooked, *flags, "-m", "Again", env=env)
    assert stopped.returncode == 1
    assert stopped.stderr == (
        "git obversa hook prepare-commit-msg: git-obversa cannot start: its interpreter "
        f"{tmp_path}/gone-venv/bin/python is gone (obversa.strict is set)\n"
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie waits for its parent (init) to reap it: it is no longer running.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_a_composer_timeout_ends_its_whole_process_group(hooked, tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    # The composer leaves a grandchild in the background holding its output, then hangs.
    command = f"sh -c 'sleep 300 & echo $! > {pid_file}; sleep 300'"
    git(hooked, "config", "obversa.composer", command)
    git(hooked, "config", "obversa.composerTimeout", "1")
    capture(hooked, REASON)
    change(hooked)
    start = time.perf_counter()
    completed = commit(hooked, "-m", "Retry")  # waits for git's pipes to close
    assert completed.returncode == 0, completed.stderr
    assert time.perf_counter() - start < 15
    assert "gave no answer within 1 s" in completed.stderr
    deadline = time.time() + 5
    while alive(int(pid_file.read_text())) and time.time() < deadline:
        time.sleep(0.05)
    assert not alive(int(pid_file.read_text()))
    assert REASON in message(hooked)


def test_a_composer_that_answers_and_leaves_a_child_behind_does_not_hold_the_commit(
    hooked, tmp_path
):
    pid_file = tmp_path / "daemon.pid"
    source = (
        "import json, subprocess, sys\n"
        f"child = subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "print(json.dumps({'subject': 's', 'body': 'Kept because bursts.'}))\n"
    )
    git(hooked, "config", "obversa.composer", write_composer(tmp_path, source))
    git(hooked, "config", "obversa.composerTimeout", "20")
    capture(hooked, REASON)
    change(hooked)
    start = time.perf_counter()
    completed = commit(hooked, "-m", "Retry")
    assert completed.returncode == 0, completed.stderr
    assert time.perf_counter() - start < 10  # a child in its own session holds our pipes only
    assert "Kept because bursts." in message(hooked)
    os.kill(int(pid_file.read_text()), 9)


def test_a_why_block_written_by_hand_is_kept_never_doubled(hooked, tmp_path):
    capture(hooked, REASON)
    change(hooked)
    (tmp_path / "msg").write_text("Retry\n\nWhy:\nThe gateway team asked for it in PAY-411.\n")
    assert commit(hooked, "-F", str(tmp_path / "msg")).returncode == 0
    body = message(hooked)
    assert body == (
        f"Retry\n\nWhy:\nThe gateway team asked for it in PAY-411.\n\n{REASON}\n\n"
        "Obversa-Record: implement\n"
    )
    capture(hooked, REASON)
    assert commit(hooked, "--amend", "--no-edit").returncode == 0
    assert message(hooked) == body


@pytest.mark.parametrize("setting", ["#", ";", "%", "auto"])
@pytest.mark.parametrize("how", ["message", "editor", "amend"])
def test_every_comment_char_gives_one_block(hooked, tmp_path, setting, how):
    git(hooked, "config", "core.commentChar", setting)
    reasoning = "#1 first, because a.\n\n; second, since b.\n\n% third, so c.\n\n: fourth, so d."
    capture(hooked, reasoning, kind="note")
    change(hooked)
    if how == "editor":
        completed = commit(hooked, editor=editor_script(tmp_path, "sed -i '1i Retry' \"$1\""))
    else:
        completed = commit(hooked, "--cleanup=strip", "-m", "Retry")
        if how == "amend":
            capture(hooked, reasoning, kind="note")
            completed = commit(hooked, "--amend", editor=editor_script(tmp_path, "true"))
    assert completed.returncode == 0, completed.stderr
    body = message(hooked)
    assert body.count("Why:") == 1
    for line in ("#1 first, because a.", "; second, since b.", "% third, so c.", ": fourth, so d."):
        assert body.count(line) == 1, body
    assert trailers(hooked) == "Obversa-Record: implement\n"
    assert pending(hooked) == []


@pytest.mark.parametrize("cleanup", [[], ["--cleanup=strip"]])
def test_auto_comment_char_a_message_of_hash_lines_gets_its_reasoning(hooked, cleanup):
    """Under `core.commentChar=auto` git picks a character no line of the message starts
    with: for `-m "#12 ..."` not `#`, so that line is the message, never a comment."""
    git(hooked, "config", "core.commentChar", "auto")
    capture(hooked, REASON)
    change(hooked)
    assert commit(hooked, *cleanup, "-m", "#12 Retry API calls").returncode == 0
    assert message(hooked) == (
        f"#12 Retry API calls\n\nWhy:\n{REASON}\n\nObversa-Record: implement\n"
    )
    assert pending(hooked) == []


def test_auto_comment_char_an_editor_set_to_colon_still_has_its_block_left_out(hooked):
    # `GIT_EDITOR=: git commit --amend`: git "opens" the editor `:`, and tells the hooks
    # GIT_EDITOR=: as it does when there is no editor. Its comment block names the
    # character it picked (#), so the block is told from the message all the same.
    git(hooked, "config", "core.commentChar", "auto")
    capture(hooked, REASON)
    change(hooked)
    assert commit(hooked, "-m", "Retry API calls").returncode == 0
    late = "Cap the delay at two seconds."
    capture(hooked, late)
    completed = commit(hooked, "--amend", editor=":")
    assert completed.returncode == 0, completed.stderr
    assert message(hooked) == (
        f"Retry API calls\n\nWhy:\n{REASON}\n\n{late}\n\nObversa-Record: implement\n"
    )


def test_latin1_commit_encoding_gives_one_correctly_encoded_block(hooked):
    git(hooked, "config", "i18n.commitEncoding", "ISO-8859-1")
    capture(hooked, "Café crème costs 3 € because naïve retries burst.", kind="note")
    change(hooked)
    message_bytes = "Réessayer\n".encode("latin-1")
    (hooked / "msg").write_bytes(message_bytes)
    assert commit(hooked, "-F", "msg").returncode == 0
    raw = subprocess.run(
        ["git", "cat-file", "commit", "HEAD"], cwd=hooked, capture_output=True, check=True
    ).stdout
    assert b"\nencoding ISO-8859-1\n" in raw
    assert "Café crème costs 3 ? because naïve".encode("latin-1") in raw
    # Shown in UTF-8: every accent survived; € has no latin1 form.
    git(hooked, "config", "i18n.logOutputEncoding", "UTF-8")
    assert message(hooked) == (
        "Réessayer\n\nWhy:\nCafé crème costs 3 ? because naïve retries burst.\n\n"
        "Obversa-Record: implement\n"
    )
    assert pending(hooked) == []


def test_latin1_editor_session_shows_and_writes_the_reasoning_in_latin1(hooked, tmp_path):
    git(hooked, "config", "i18n.commitEncoding", "ISO-8859-1")
    git(hooked, "config", "i18n.logOutputEncoding", "UTF-8")
    capture(hooked, "Café costs 3 € because naïve retries burst.", kind="note")
    change(hooked)
    editor = editor_script(tmp_path, "sed -i '1i Retry' \"$1\"")
    completed = commit(hooked, editor=editor)
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr == ""
    assert message(hooked) == (
        "Retry\n\nWhy:\nCafé costs 3 ? because naïve retries burst.\n\nObversa-Record: implement\n"
    )
