"""Real `git commit` with the hooks installed by `git obversa install`: every way of
giving a message, every cleanup mode, failures of the composer and of the capture file."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from git_obversa.lookup.why import parse_reasoning
from git_obversa.record.turns import TurnStore
from tests.gitutil import git, obversa

REASON = "Retry twice because the upstream API fails in bursts of two."


@pytest.fixture
def hooked(repo: Path) -> Path:
    completed = obversa("install", cwd=repo)
    assert completed.returncode == 0, completed.stderr
    return repo


def capture(cwd: Path, *texts: str, stage: str = "implement", kind: str = "engine:text") -> None:
    TurnStore.for_worktree(cwd).append(
        [{"stage": stage, "node": stage, "kind": kind, "text": text} for text in texts]
    )


def pending(cwd: Path) -> list[str]:
    return [turn["text"] for turn in TurnStore.for_worktree(cwd).read()]


def change(cwd: Path, name: str = "code.py", text: str = "retries = 2\n") -> None:
    with open(cwd / name, "a") as handle:
        handle.write(text)
    git(cwd, "add", name)


def commit(cwd: Path, *args: str, editor: str = ":", env: dict | None = None):
    environment = {**os.environ, "GIT_EDITOR": editor, **(env or {})}
    return subprocess.run(
        ["git", "commit", "-q", *args], cwd=cwd, capture_output=True, text=True, env=environment
    )


# The id of a commit's kept record is random: tests of the message compare it without.
RECORD_ID_LINE = re.compile(r"^Obversa-Record-Id: [0-9a-f]{16}\n", re.MULTILINE)


def without_record_ids(text: str) -> str:
    return RECORD_ID_LINE.sub("", text)


def message(cwd: Path, rev: str = "HEAD") -> str:
    # %B ends with the message's own newline; git log adds one more after the entry.
    return without_record_ids(git(cwd, "log", "-1", "--format=%B", rev)[:-1])


def trailers(cwd: Path, rev: str = "HEAD") -> str:
    raw = git(cwd, "log", "-1", "--format=%B", rev)
    return without_record_ids(git(cwd, "interpret-trailers", "--parse", input=raw))


def editor_script(tmp_path: Path, body: str) -> str:
    script = tmp_path / "editor.sh"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_message_flag_gets_why_block_and_turns_are_cleared(hooked):
    assert obversa("record", "note", "--stage", "implement", REASON, cwd=hooked).returncode == 0
    change(hooked)
    completed = commit(hooked, "-m", "Retry API calls")
    assert completed.returncode == 0, completed.stderr
    assert message(hooked) == f"Retry API calls\n\nWhy:\n{REASON}\n\nObversa-Record: implement\n"
    assert trailers(hooked) == "Obversa-Record: implement\n"
    assert pending(hooked) == []


RUNTIME = Path(".git") / "hooks" / "obversa-runtime"


def spy_python(repo: Path, tmp_path: Path) -> Path:
    """Point the shims' runtime file at a wrapper that logs the hook each start runs
    (the 6th argument: after -I -S -c CODE PACKAGE GITDIR) and then runs the real one."""
    calls = tmp_path / "calls"
    spy = tmp_path / "python-spy"
    spy.write_text(f'#!/bin/sh\necho "$7" >> {calls}\nexec {sys.executable} "$@"\n')
    spy.chmod(0o755)
    runtime = repo / RUNTIME
    package = runtime.read_text().splitlines()[1]
    runtime.write_text(f"{spy}\n{package}\n")
    return calls


def test_nothing_pending_leaves_the_message_alone_without_starting_python(hooked, tmp_path):
    calls = spy_python(hooked, tmp_path)
    change(hooked)
    completed = commit(hooked, "-m", "Plain")
    assert completed.returncode == 0, completed.stderr
    assert message(hooked) == "Plain\n"
    assert not calls.exists()


def test_post_commit_clears_the_turns_without_starting_python(hooked, tmp_path):
    calls = spy_python(hooked, tmp_path)
    capture(hooked, REASON)
    change(hooked)
    completed = commit(hooked, "-m", "Retry")
    assert completed.returncode == 0, completed.stderr
    assert calls.read_text() == "prepare-commit-msg\n"  # one start; post-commit ran in sh
    assert "Why:\nRetry twice" in message(hooked)
    assert pending(hooked) == []


def test_the_lean_start_and_the_console_script_write_the_same_message(hooked, tmp_path):
    git(hooked, "config", "core.commentChar", ";")
    written = []
    for lean in (True, False):
        if not lean:
            (hooked / RUNTIME).unlink()
        capture(hooked, "#1 Retry twice because bursts.\n\n; Cap at 5 s.", kind="note")
        change(hooked, text=f"lean = {lean}\n")
        completed = commit(hooked, "-s", "-m", "Retry")
        assert completed.returncode == 0, completed.stderr
        written.append(message(hooked))
        assert pending(hooked) == []
    assert written[0] == written[1]
    assert "Why:\n#1 Retry twice because bursts.\n\n ; Cap at 5 s.\n" in written[0]


def test_turns_captured_while_the_editor_is_open_wait_for_the_next_commit(hooked, tmp_path):
    capture(hooked, REASON)
    change(hooked)
    late = "Cap the delay at two seconds."
    editor = editor_script(
        tmp_path, f"git obversa record note --stage implement '{late}' && sed -i '1i Retry' \"$1\""
    )
    completed = commit(hooked, editor=editor)
    assert completed.returncode == 0, completed.stderr
    assert "Retry twice" in message(hooked) and late not in message(hooked)
    assert pending(hooked) == [late]
    change(hooked, text="delay = 2\n")
    assert commit(hooked, "-m", "Cap the delay").returncode == 0
    assert late in message(hooked) and "Retry twice" not in message(hooked)
    assert pending(hooked) == []


def path_without_git_obversa() -> str:
    return os.pathsep.join(
        folder
        for folder in os.environ["PATH"].split(os.pathsep)
        if not (Path(folder) / "git-obversa").exists()
    )


def test_missing_git_obversa_warns_or_in_strict_mode_stops_the_commit(hooked):
    (hooked / RUNTIME).unlink()  # no interpreter named by install: PATH is asked
    capture(hooked, REASON)
    change(hooked)
    warned = commit(hooked, "-m", "Retry", env={"PATH": path_without_git_obversa()})
    assert warned.returncode == 0
    assert warned.stderr == (
        "warning: git-obversa is not on PATH; the commit proceeds without reasoning\n"
    )
    assert message(hooked) == "Retry\n" and pending(hooked) == [REASON]
    git(hooked, "config", "obversa.strict", "true")
    change(hooked, text="again = 1\n")
    before = git(hooked, "rev-parse", "HEAD")
    stopped = commit(hooked, "-m", "Again", env={"PATH": path_without_git_obversa()})
    assert stopped.returncode != 0
    assert stopped.stderr.splitlines()[0] == (
        "git obversa hook prepare-commit-msg: git-obversa is not on PATH (obversa.strict is set)"
    )
    assert git(hooked, "rev-parse", "HEAD") == before


def test_aborted_commit_then_a_commit_without_git_obversa_keeps_the_turns(hooked, tmp_path):
    (hooked / RUNTIME).unlink()
    capture(hooked, REASON)
    change(hooked)
    assert commit(hooked, "-m", "Retry").returncode == 0  # HEAD carries a record trailer
    capture(hooked, "Kept for later.")
    change(hooked, text="later = 1\n")
    assert commit(hooked, editor=editor_script(tmp_path, ': > "$1"')).returncode != 0
    # The shim cannot start git-obversa: the amended commit keeps HEAD's message and
    # trailer, but it carries none of the pending turns, so none may be dropped.
    amended = commit(hooked, "--amend", "--no-edit", env={"PATH": path_without_git_obversa()})
    assert amended.returncode == 0, amended.stderr
    assert "git-obversa is not on PATH" in amended.stderr
    assert pending(hooked) == ["Kept for later."]


def test_editor_shows_the_reasoning_as_comments_and_quitting_aborts_as_without_the_hook(
    hooked, tmp_path
):
    capture(hooked, REASON)
    change(hooked)
    seen = tmp_path / "seen.txt"
    before = git(hooked, "rev-parse", "HEAD")
    completed = commit(hooked, editor=editor_script(tmp_path, f'cp "$1" {seen}'))
    assert completed.returncode == 1
    assert completed.stderr == "Aborting commit due to empty commit message.\n"
    assert git(hooked, "rev-parse", "HEAD") == before
    shown = seen.read_text()
    assert f"# Why:\n# {REASON}\n" in shown
    assert "#   Retry twice because the upstream API fails in bursts of two\n" in shown
    assert "# Please enter the commit message" in shown
    assert pending(hooked) == [REASON]
    typed = commit(hooked, editor=editor_script(tmp_path, "sed -i '1i Retry API calls' \"$1\""))
    assert typed.returncode == 0, typed.stderr
    assert message(hooked) == f"Retry API calls\n\nWhy:\n{REASON}\n\nObversa-Record: implement\n"
    assert pending(hooked) == []


def test_untouched_template_aborts_as_without_the_hook(hooked, tmp_path):
    template = tmp_path / "template.txt"
    template.write_text("Subject from the template\n")
    git(hooked, "config", "commit.template", str(template))
    capture(hooked, REASON)
    change(hooked)
    completed = commit(hooked, editor=":")
    assert completed.returncode == 1
    assert "you did not edit the message" in completed.stderr
    assert pending(hooked) == [REASON]
    edited = commit(hooked, editor=editor_script(tmp_path, "sed -i '1s/.*/Edited subject/' \"$1\""))
    assert edited.returncode == 0, edited.stderr
    assert message(hooked).startswith(f"Edited subject\n\nWhy:\n{REASON}\n")
    assert pending(hooked) == []


def test_deleting_the_first_shown_line_leaves_the_reasoning_out(hooked, tmp_path):
    capture(hooked, REASON)
    change(hooked)
    editor = editor_script(tmp_path, "sed -i -e '/adds this reasoning/d' -e '1i Mine' \"$1\"")
    completed = commit(hooked, editor=editor)
    assert completed.returncode == 0, completed.stderr
    assert message(hooked) == "Mine\n"
    assert pending(hooked) == [REASON]


def test_editor_typed_subject_replaces_the_composed_one(hooked, tmp_path):
    capture(hooked, REASON)
    change(hooked)
    completed = commit(hooked, editor=editor_script(tmp_path, "sed -i '1c Typed subject' \"$1\""))
    assert completed.returncode == 0, completed.stderr
    assert message(hooked).startswith("Typed subject\n\nWhy:\nRetry twice")


def test_emptied_message_aborts_and_the_turns_wait_for_the_next_commit(hooked, tmp_path):
    capture(hooked, REASON)
    change(hooked)
    before = git(hooked, "rev-parse", "HEAD")
    aborted = commit(hooked, editor=editor_script(tmp_path, ': > "$1"'))
    assert aborted.returncode != 0
    assert "empty commit message" in aborted.stderr
    assert git(hooked, "rev-parse", "HEAD") == before
    assert pending(hooked) == [REASON]
    assert commit(hooked, "-m", "Second try").returncode == 0
    assert "Why:\nRetry twice" in message(hooked)
    assert pending(hooked) == []


def test_block_deleted_in_editor_keeps_the_turns(hooked, tmp_path):
    capture(hooked, REASON)
    change(hooked)
    completed = commit(hooked, editor=editor_script(tmp_path, "printf 'Just this\\n' > \"$1\""))
    assert completed.returncode == 0, completed.stderr
    assert message(hooked) == "Just this\n"
    assert pending(hooked) == [REASON]


def test_message_file(hooked, tmp_path):
    capture(hooked, REASON)
    change(hooked)
    (tmp_path / "msg").write_text("From a file\n\nThe user's body.\n")
    assert commit(hooked, "-F", str(tmp_path / "msg")).returncode == 0
    assert message(hooked).startswith("From a file\n\nThe user's body.\n\nWhy:\nRetry twice")
    assert trailers(hooked) == "Obversa-Record: implement\n"


def test_amend_no_edit_adds_new_turns_to_the_one_block(hooked):
    capture(hooked, REASON)
    change(hooked)
    assert commit(hooked, "-m", "Retry API calls").returncode == 0
    capture(hooked, "Cap the delay at two seconds.", stage="review")
    change(hooked, text="delay = 2\n")
    assert commit(hooked, "--amend", "--no-edit").returncode == 0
    body = message(hooked)
    assert body.count("Why:") == 1
    assert "Retry twice" in body and "Cap the delay at two seconds." in body
    assert trailers(hooked) == "Obversa-Record: implement\nObversa-Record: review\n"
    # Nothing new pending: a further amend leaves the message exactly as it was.
    assert commit(hooked, "--amend", "--no-edit").returncode == 0
    assert message(hooked) == body


def test_signoff_and_trailer_option_stay_last_and_parse(hooked):
    capture(hooked, REASON)
    change(hooked)
    completed = commit(hooked, "-s", "--trailer", "Fixes: #12", "-m", "Retry API calls")
    assert completed.returncode == 0, completed.stderr
    assert trailers(hooked) == (
        "Signed-off-by: Test Author <author@example.com>\nFixes: #12\nObversa-Record: implement\n"
    )
    body = message(hooked)
    assert body.index("Why:") < body.index("Signed-off-by")


def test_verbose_commit_keeps_the_block_above_the_scissors(hooked, tmp_path):
    capture(hooked, REASON)
    change(hooked)
    seen = tmp_path / "seen.txt"
    editor = editor_script(tmp_path, f'cp "$1" {seen} && sed -i "1i Retry" "$1"')
    completed = commit(hooked, "-v", editor=editor)
    assert completed.returncode == 0, completed.stderr
    shown = seen.read_text()
    assert shown.index("# Why:") < shown.index(">8") < shown.index("diff --git")
    assert "diff --git" not in message(hooked)
    assert trailers(hooked) == "Obversa-Record: implement\n"


@pytest.mark.parametrize("mode", ["verbatim", "whitespace", "strip"])
def test_cleanup_modes_keep_the_block(hooked, mode):
    capture(hooked, "#12 is why: retries.\n\n\n#  second paragraph  ")
    change(hooked)
    assert commit(hooked, f"--cleanup={mode}", "-m", "Retry").returncode == 0
    assert message(hooked) == (
        "Retry\n\nWhy:\n #12 is why: retries.\n\n # second paragraph\n\nObversa-Record: implement\n"
    )
    assert trailers(hooked) == "Obversa-Record: implement\n"


@pytest.mark.parametrize("setting", [";", "auto"])
def test_comment_char_setting_is_respected_in_editor_mode(hooked, tmp_path, setting):
    git(hooked, "config", "core.commentChar", setting)
    capture(hooked, "; starts with a semicolon\n\n# and a hash\n\n: and a colon")
    change(hooked)
    editor = editor_script(tmp_path, "sed -i '1i Retry' \"$1\"")
    completed = commit(hooked, "--cleanup=strip", editor=editor)
    assert completed.returncode == 0, completed.stderr
    body = message(hooked)
    assert "; starts with a semicolon" in body
    assert "# and a hash" in body
    assert ": and a colon" in body
    assert "Please enter" not in body
    assert trailers(hooked) == "Obversa-Record: implement\n"


def test_merge_message_is_left_alone_and_turns_stay(hooked):
    git(hooked, "checkout", "-q", "-b", "side")
    change(hooked, "side.txt")
    git(hooked, "commit", "-q", "-m", "side work")
    git(hooked, "checkout", "-q", "main")
    change(hooked, "main.txt")
    git(hooked, "commit", "-q", "-m", "main work")
    capture(hooked, REASON)
    git(hooked, "merge", "-q", "--no-edit", "side")
    assert message(hooked) == "Merge branch 'side'\n"
    assert pending(hooked) == [REASON]


def test_two_linked_worktrees_committing_at_once_keep_their_own_reasoning(hooked, tmp_path):
    trees = []
    for name in ("one", "two"):
        tree = tmp_path / name
        git(hooked, "worktree", "add", "-q", "-b", name, str(tree))
        capture(tree, f"Reasoning of worktree {name}.", stage=name)
        change(tree, f"{name}.txt")
        trees.append(tree)
    processes = [
        subprocess.Popen(
            ["git", "commit", "-q", "-m", f"work in {tree.name}"],
            cwd=tree,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tree in trees
    ]
    for process in processes:
        assert process.wait(timeout=60) == 0, process.stderr.read()
    for tree, other in (trees, reversed(trees)):
        body = message(tree)
        assert f"Reasoning of worktree {tree.name}." in body
        assert f"worktree {other.name}" not in body
        assert trailers(tree) == f"Obversa-Record: {tree.name}\n"
        assert pending(tree) == []


def write_composer(tmp_path: Path, source: str) -> str:
    script = tmp_path / "composer.py"
    script.write_text(source)
    return f"{sys.executable} {script}"


def test_configured_composer_gets_the_turns_and_its_output_is_scrubbed(hooked, tmp_path):
    seen = tmp_path / "request.json"
    command = write_composer(
        tmp_path,
        "import json, sys\n"
        f"request = json.load(sys.stdin); open({str(seen)!r}, 'w').write(json.dumps(request))\n"
        "print(json.dumps({'subject': 'feat(implement): retry', "
        "'body': 'Using sk-' + 'a' * 32 + ' keeps retries in budget.'}))\n",
    )
    git(hooked, "config", "obversa.composer", command)
    capture(hooked, REASON)
    change(hooked)
    assert commit(hooked, "-m", "Retry").returncode == 0
    assert json.loads(seen.read_text())["captured"] == [
        {"node": "implement", "kind": "engine:text", "text": REASON}
    ]
    assert message(hooked) == (
        "Retry\n\nWhy:\nUsing [redacted] keeps retries in budget.\n\nObversa-Record: implement\n"
    )


@pytest.mark.parametrize(
    "source, warning",
    [
        ("import sys; sys.exit(3)", "exited 3"),
        ("import time; time.sleep(30)", "no answer within 0.5 s"),
        ("print('this is not json')", "not JSON"),
        (
            "import json; print(json.dumps({'subject': 'two\\nlines', 'body': 'b'}))",
            'no one-line "subject"',
        ),
    ],
    ids=["crash", "hang", "junk", "unusable"],
)
def test_broken_composer_gives_the_captured_text_and_one_warning(hooked, tmp_path, source, warning):
    git(hooked, "config", "obversa.composer", write_composer(tmp_path, source))
    git(hooked, "config", "obversa.composerTimeout", "0.5")
    capture(hooked, "Retry twice: the key sk-" + "a" * 32 + " fails in bursts.")
    change(hooked)
    completed = commit(hooked, "-m", "Retry API calls")
    assert completed.returncode == 0, completed.stderr
    assert warning in completed.stderr
    assert completed.stderr.strip().endswith("; the commit gets the captured text")
    assert len(completed.stderr.strip().splitlines()) == 1
    assert message(hooked) == (
        "Retry API calls\n\nWhy:\nRetry twice: the key [redacted] fails in bursts.\n\n"
        "Obversa-Record: implement\n"
    )
    assert pending(hooked) == []


@pytest.mark.parametrize("source", ["import sys; sys.exit(3)", "import time; time.sleep(30)"])
def test_strict_mode_stops_the_commit_when_composition_fails_or_hangs(hooked, tmp_path, source):
    git(hooked, "config", "obversa.composer", write_composer(tmp_path, source))
    git(hooked, "config", "obversa.composerTimeout", "0.5")
    git(hooked, "config", "obversa.strict", "true")
    capture(hooked, REASON)
    change(hooked)
    before = git(hooked, "rev-parse", "HEAD")
    completed = commit(hooked, "-m", "Retry API calls")
    assert completed.returncode == 1
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("git obversa hook prepare-commit-msg: ")
    assert lines[0].endswith("(obversa.strict is set)")
    assert git(hooked, "rev-parse", "HEAD") == before
    assert pending(hooked) == [REASON]


def test_token_split_across_turns_is_redacted(hooked):
    git(hooked, "config", "obversa.thinking", "include")
    capture(hooked, "Chose retries for sk-aaaa")
    capture(hooked, "a" * 28 + " because calls fail in bursts.", kind="engine:thinking")
    change(hooked)
    assert commit(hooked, "-m", "Retry").returncode == 0
    body = message(hooked)
    assert "Chose retries for [redacted]\n\nbecause calls fail in bursts." in body
    assert "sk-" not in body and "aaaa" not in body


def test_a_secret_split_between_what_was_said_and_thought_goes_though_thinking_is_left_out(
    hooked,
):
    capture(hooked, "Chose retries for sk-aaaa")
    capture(hooked, "a" * 28 + " because calls fail in bursts.", kind="engine:thinking")
    change(hooked)
    assert commit(hooked, "-m", "Retry").returncode == 0
    body = message(hooked)
    assert "Chose retries for [redacted]" in body
    assert "sk-" not in body and "aaaa" not in body and "because calls" not in body


def test_corrupt_capture_fails_open_with_one_warning(hooked):
    store = TurnStore.for_worktree(hooked)
    store.directory.mkdir(parents=True, exist_ok=True)
    store.turns_file.write_text("{not json\n")
    change(hooked)
    completed = commit(hooked, "-m", "Still commits")
    assert completed.returncode == 0
    assert completed.stderr.startswith("warning: git obversa hook prepare-commit-msg:")
    assert len(completed.stderr.strip().splitlines()) == 1
    assert message(hooked) == "Still commits\n"


def run_hook(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The hook as git runs it, by the console script's own path (PATH may lack git)."""
    script = Path(sys.executable).parent / "git-obversa"
    return subprocess.run(
        [str(script), "hook", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )


def test_missing_git_fails_open_with_one_warning(hooked, tmp_path):
    capture(hooked, REASON)
    message_file = tmp_path / "COMMIT_EDITMSG"
    message_file.write_text("Subject\n")
    for args in (["prepare-commit-msg", str(message_file), "message"], ["post-commit"]):
        completed = run_hook(hooked, *args, env={"PATH": str(tmp_path / "nowhere")})
        assert completed.returncode == 0
        lines = completed.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"warning: git obversa hook {args[0]}:")
        assert "git could not start" in lines[0]
    assert message_file.read_text() == "Subject\n"
    assert pending(hooked) == [REASON]


def test_a_message_file_that_cannot_be_written_fails_open_and_keeps_the_turns(hooked, tmp_path):
    capture(hooked, REASON)
    not_a_file = tmp_path / "COMMIT_EDITMSG"
    not_a_file.mkdir()
    completed = run_hook(hooked, "prepare-commit-msg", str(not_a_file), "message")
    assert completed.returncode == 0
    assert completed.stderr.startswith("warning: git obversa hook prepare-commit-msg:")
    assert len(completed.stderr.strip().splitlines()) == 1
    assert pending(hooked) == [REASON]
    git(hooked, "config", "obversa.strict", "true")
    strict = run_hook(hooked, "prepare-commit-msg", str(not_a_file), "message")
    assert strict.returncode == 1
    assert strict.stderr.strip().endswith("(obversa.strict is set)")
    assert len(strict.stderr.strip().splitlines()) == 1


def test_composer_timeout_that_is_not_a_number_is_named_in_the_warning(hooked, tmp_path):
    git(hooked, "config", "obversa.composer", write_composer(tmp_path, "print('{}')"))
    git(hooked, "config", "obversa.composerTimeout", "soon")
    capture(hooked, REASON)
    change(hooked)
    completed = commit(hooked, "-m", "Retry")
    assert completed.returncode == 0
    assert completed.stderr.strip().splitlines() == [
        "warning: git obversa hook prepare-commit-msg: obversa.composerTimeout is 'soon', "
        "not a number of seconds; fix it with `git config obversa.composerTimeout 30`; "
        "the commit proceeds without reasoning"
    ]
    assert message(hooked) == "Retry\n"
    assert pending(hooked) == [REASON]


def test_two_stages_on_the_floor_give_one_why_heading(hooked, tmp_path):
    git(hooked, "config", "obversa.composer", write_composer(tmp_path, "import sys; sys.exit(1)"))
    capture(hooked, REASON, stage="implement")
    capture(hooked, "Reviewed the retry budget.", stage="review")
    change(hooked)
    assert commit(hooked, "-m", "Retry").returncode == 0
    body = message(hooked)
    assert body.count("Why:") == 1 and "## Why" not in body
    assert f"Why:\n{REASON}\n\nReviewed the retry budget.\n" in body
    assert trailers(hooked) == "Obversa-Record: implement\nObversa-Record: review\n"


def test_strict_mode_stops_the_commit_on_failure(hooked):
    git(hooked, "config", "obversa.strict", "true")
    store = TurnStore.for_worktree(hooked)
    store.directory.mkdir(parents=True, exist_ok=True)
    store.turns_file.write_text("{not json\n")
    change(hooked)
    before = git(hooked, "rev-parse", "HEAD")
    completed = commit(hooked, "-m", "Blocked")
    assert completed.returncode != 0
    assert "obversa.strict" in completed.stderr
    assert git(hooked, "rev-parse", "HEAD") == before


def test_hook_path_imports_only_what_it_needs(hooked, tmp_path):
    from git_obversa.hooks.install import LEAN_ENTRY

    capture(hooked, REASON)
    (tmp_path / "msg").write_text("Retry\n")
    python, package = (hooked / RUNTIME).read_text().splitlines()
    # Exactly what the shim runs, with an import profile.
    completed = subprocess.run(
        [python, "-I", "-S", "-X", "importtime", "-c", LEAN_ENTRY, package, ".git"]
        + ["prepare-commit-msg", str(tmp_path / "msg"), "message"],
        cwd=hooked,
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, completed.stderr
    imported = {line.split("|")[-1].strip() for line in completed.stderr.splitlines()}
    assert "git_obversa.hooks.commit" in imported  # the hook did run in Python
    for heavy in ("site", "argparse", "dulwich", "inspect", "asyncio", "typing"):
        assert not any(name.split(".")[0] == heavy for name in imported), heavy
    written = without_record_ids((tmp_path / "msg").read_text())
    assert written == f"Retry\n\nWhy:\n{REASON}\n\nObversa-Record: implement\n"


def test_reasoning_survives_cherry_pick_rebase_and_squash_merge(hooked):
    git(hooked, "checkout", "-q", "-b", "feature")
    capture(hooked, REASON)
    change(hooked, "feature.txt")
    assert commit(hooked, "-m", "Retry API calls").returncode == 0
    original = message(hooked)
    assert "Why:" in original
    git(hooked, "checkout", "-q", "main")
    change(hooked, "other.txt")
    git(hooked, "commit", "-q", "-m", "unrelated work on main")
    # Pending turns during a replay belong to none of the replayed commits.
    capture(hooked, "Reasoning for later.")

    git(hooked, "checkout", "-q", "-b", "picked", "main")
    git(hooked, "cherry-pick", "feature")
    assert message(hooked) == original

    git(hooked, "checkout", "-q", "feature")
    git(hooked, "rebase", "-q", "main")
    assert message(hooked) == original

    git(hooked, "checkout", "-q", "main")
    git(hooked, "merge", "-q", "--squash", "feature")
    assert commit(hooked, "--no-edit").returncode == 0
    # git indents the squashed messages; the reasoning reads the same.
    assert "    Why:\n    Retry twice" in message(hooked)
    assert parse_reasoning(message(hooked)) == REASON
    assert pending(hooked) == ["Reasoning for later."]


@pytest.mark.parametrize("layout", ["separate-git-dir", "subdirectory"])
def test_shims_find_the_git_dir_in_every_layout(tmp_path, layout):
    # A .git file (as in submodules) makes the shims ask git; a commit made from a
    # subdirectory still runs the hooks at the top, beside .git.
    work = tmp_path / "work"
    if layout == "separate-git-dir":
        git(tmp_path, "init", "-q", "--separate-git-dir", str(tmp_path / "store.git"), "work")
        assert (work / ".git").is_file()
    else:
        git(tmp_path, "init", "-q", "work")
    (work / "sub").mkdir()
    (work / "sub" / "README.md").write_text("hello\n")
    git(work, "add", ".")
    git(work, "commit", "-q", "-m", "initial")
    assert obversa("install", cwd=work).returncode == 0
    cwd = work / "sub" if layout == "subdirectory" else work
    assert obversa("record", "note", "--stage", "implement", REASON, cwd=cwd).returncode == 0
    change(cwd)
    completed = commit(cwd, "-m", "Retry API calls")
    assert completed.returncode == 0, completed.stderr
    assert message(work) == f"Retry API calls\n\nWhy:\n{REASON}\n\nObversa-Record: implement\n"
    assert pending(work) == []
