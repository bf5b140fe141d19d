"""Issue 14 item 2 on real `git commit`: turns composed ahead, when captured, give the
message the commit would compose itself, and the commit then only copies them in; any
change to what the composition was made from (more turns, settings, a composer, a damaged
file) sends the commit back to composing, never to a stale message."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from git_obversa.record.composition import COMPOSED, compose_ahead
from git_obversa.record.turns import TurnStore
from tests.gitutil import git, make_repo, obversa
from tests.test_hook_e2e import (
    REASON,
    RUNTIME,
    capture,
    change,
    commit,
    editor_script,
    message,
    without_record_ids,
)

LATE = "Cap the delay at two seconds so a user never waits longer."
THOUGHT = "Maybe the proxy drops idle connections; the retry covers that too."
NOTE = "#1 The budget is per request, not per session.\n\n; see the incident review."


@pytest.fixture
def twins(tmp_path: Path) -> tuple[Path, Path]:
    """Two repositories alike, hooks installed: one commits from turns composed ahead,
    the other composes at the commit."""
    pair = []
    for name in ("ahead", "at-commit"):
        path = make_repo(tmp_path / name)
        assert obversa("install", cwd=path).returncode == 0
        pair.append(path)
    return pair[0], pair[1]


def import_log(repo: Path, tmp_path: Path) -> Path:
    """Make the shims' Python log its imports (`-X importtime`) to the returned file."""
    log = tmp_path / f"imports-{repo.name}"
    spy = tmp_path / f"python-spy-{repo.name}"
    spy.write_text(f'#!/bin/sh\nexec {sys.executable} -X importtime "$@" 2>>{log}\n')
    spy.chmod(0o755)
    runtime = repo / RUNTIME
    package = runtime.read_text().splitlines()[1]
    runtime.write_text(f"{spy}\n{package}\n")
    return log


def composed_at_commit(log: Path) -> bool:
    """Whether the hook composed (imported the composer) in the runs LOG holds."""
    return "git_obversa.record.composer" in log.read_text()


def both(
    twins, tmp_path, setup, *commit_args: str, editor: str = ":", python: bool = False
) -> tuple[str, str]:
    """Run SETUP(repo) in both twins, compose ahead in the first, commit both with
    COMMIT_ARGS; the two messages. Checks the first copied its composition in: in sh,
    or, where PYTHON says the shim leaves it to Python, without composing."""
    ahead, plain = twins
    log = import_log(ahead, tmp_path)
    messages = []
    for repo in twins:
        setup(repo)
        if repo == ahead:
            assert compose_ahead(TurnStore.for_worktree(repo).directory, repo)
        change(repo)
        completed = commit(repo, *commit_args, editor=editor)
        assert completed.returncode == 0, completed.stderr
        assert TurnStore.for_worktree(repo).read() == []
        messages.append(message(repo))
    assert log.exists() == python
    assert not python or not composed_at_commit(log)
    return messages[0], messages[1]


def varied_turns(repo: Path) -> None:
    capture(repo, REASON, THOUGHT.replace("Maybe", "So"))
    capture(repo, THOUGHT, kind="engine:thinking")
    capture(repo, NOTE, kind="note")
    capture(repo, "A note from Windows,\r\nline two.", kind="note")
    capture(repo, "Reviewed: the retry budget holds under load.", stage="review")
    capture(repo, "word " * 2000 + "because long turns are bounded.")


@pytest.mark.parametrize(
    ("settings", "commit_args", "python"),
    [
        ({}, ("-m", "Retry API calls"), False),
        ({}, ("-s", "-m", "Retry\n\nBody text.\n\nCo-authored-by: B <b@example.com>"), False),
        (
            {"core.commentChar": "auto", "obversa.thinking": "include"},
            ("-m", "Retry #1\n\n; the budget is per request"),
            True,  # `auto`: which character git picks is for Python to work out
        ),
        ({"obversa.maxWhy": "300", "commit.cleanup": "verbatim"}, ("-m", "Retry"), False),
    ],
)
def test_composed_ahead_is_the_message_composed_at_commit(
    twins, tmp_path, settings, commit_args, python
):
    def setup(repo: Path) -> None:
        for key, value in settings.items():
            git(repo, "config", key, value)
        varied_turns(repo)

    ahead, composed = both(twins, tmp_path, setup, *commit_args, python=python)
    assert ahead == composed
    assert "Why:" in ahead and "Obversa-Record: review" in ahead


def test_the_editor_and_an_amend_get_the_same_message_too(twins, tmp_path):
    writes = editor_script(
        tmp_path, 'printf "Retry API calls\\n\\n%s\\n" "$(cat "$1")" > "$1.new"; mv "$1.new" "$1"'
    )
    ahead, composed = both(twins, tmp_path, varied_turns, editor=writes, python=True)
    assert ahead == composed and "Why:" in ahead

    def more(repo: Path) -> None:
        capture(repo, LATE)

    ahead, composed = both(twins, tmp_path, more, "--amend", "--no-edit", python=True)
    assert ahead == composed
    assert ahead.count("Why:") == 1 and LATE in ahead and REASON in ahead


def test_a_python_record_composes_ahead_when_its_writer_pauses(twins, tmp_path):
    """`ReasoningRecord` with `repository=`: deltas alone are not composed (the commit
    composes them, in Python); an event after them under the stage's path (here a tool
    call) composes ahead, and the commit copies that in without starting Python."""
    from git_obversa import open_reasoning_record

    writer = [
        ("engine:thinking", "Two retries or three? "),
        ("engine:thinking", "Two: the bursts last two calls."),
        ("engine:text", "Retry twice: "),
        ("engine:text", "the upstream API fails in bursts of two."),
    ]
    logs, records = [], []
    for repo in twins:
        logs.append(import_log(repo, tmp_path))
        git(repo, "config", "obversa.thinking", "include")
        record = open_reasoning_record("implement", repository=repo)
        for kind, delta in writer:
            record.observe({"kind": kind, "path": ["run", "implement"], "delta": delta})
        record.observe({"kind": "engine:tool", "path": ["run", "review"]})  # not its stage
        assert not (TurnStore.for_worktree(repo).directory / COMPOSED).exists()
        records.append(record)
    # The writer calls a tool (deeper under its stage): it paused, so composing is due.
    records[0].observe({"kind": "engine:tool", "path": ["run", "implement", "bash"]})
    assert (TurnStore.for_worktree(twins[0]).directory / COMPOSED).exists()

    messages = []
    for repo in twins:
        change(repo)
        completed = commit(repo, "-m", "Retry API calls")
        assert completed.returncode == 0, completed.stderr
        assert TurnStore.for_worktree(repo).read() == []
        messages.append(message(repo))
    assert messages[0] == messages[1]
    assert "Why:\nTwo retries or three? Two: the bursts last two calls." in messages[0]
    assert "Retry twice: the upstream API fails in bursts of two." in messages[0]
    assert not logs[0].exists()  # the ahead twin's commit started no Python
    assert composed_at_commit(logs[1])


def test_a_turn_captured_after_composing_is_not_lost(hooked_repo, tmp_path):
    log = import_log(hooked_repo, tmp_path)
    capture(hooked_repo, REASON)
    assert compose_ahead(TurnStore.for_worktree(hooked_repo).directory, hooked_repo)
    capture(hooked_repo, LATE)  # appended without composing again: the composition is stale
    change(hooked_repo)
    assert commit(hooked_repo, "-m", "Retry").returncode == 0
    assert f"Why:\n{REASON}\n\n{LATE}\n" in message(hooked_repo)
    assert composed_at_commit(log)
    assert TurnStore.for_worktree(hooked_repo).read() == []


def test_settings_changed_after_composing_are_obeyed(hooked_repo, tmp_path):
    composer = tmp_path / "composer.py"
    composer.write_text(
        "import json, sys\njson.load(sys.stdin)\n"
        'print(json.dumps({"subject": "s", "body": "From the configured composer."}))\n'
    )
    capture(hooked_repo, REASON)
    assert compose_ahead(TurnStore.for_worktree(hooked_repo).directory, hooked_repo)
    git(hooked_repo, "config", "obversa.composer", f"{sys.executable} {composer}")
    change(hooked_repo)
    assert commit(hooked_repo, "-m", "Retry").returncode == 0
    assert "Why:\nFrom the configured composer.\n" in message(hooked_repo)

    git(hooked_repo, "config", "--unset", "obversa.composer")
    capture(hooked_repo, "#2 Keep the jitter.\n\n; not a comment.", kind="note")
    assert compose_ahead(TurnStore.for_worktree(hooked_repo).directory, hooked_repo)
    git(hooked_repo, "config", "core.commentChar", ";")  # now the second line needs a space
    change(hooked_repo)
    assert commit(hooked_repo, "-m", "Jitter").returncode == 0
    assert "Why:\n#2 Keep the jitter.\n\n ; not a comment.\n" in message(hooked_repo)


def test_an_aborted_commit_keeps_the_composition_for_the_retry(hooked_repo, tmp_path):
    log = import_log(hooked_repo, tmp_path)
    capture(hooked_repo, REASON)
    assert compose_ahead(TurnStore.for_worktree(hooked_repo).directory, hooked_repo)
    change(hooked_repo)
    before = git(hooked_repo, "rev-parse", "HEAD")
    # Quitting the editor without a message aborts; the turns stay pending (claimed).
    assert commit(hooked_repo, editor=":").returncode != 0
    assert git(hooked_repo, "rev-parse", "HEAD") == before
    assert commit(hooked_repo, "-m", "Retry").returncode == 0
    assert message(hooked_repo) == f"Retry\n\nWhy:\n{REASON}\n\nObversa-Record: implement\n"
    assert not composed_at_commit(log)


def test_a_damaged_composition_is_not_trusted(hooked_repo):
    capture(hooked_repo, REASON)
    store = TurnStore.for_worktree(hooked_repo)
    assert compose_ahead(store.directory, hooked_repo)
    composed = store.directory / COMPOSED
    text = composed.read_text()
    composed.write_text(text.replace("Retry twice", "Unscrubbed sk-live-1234"))  # lengths off
    change(hooked_repo)
    assert commit(hooked_repo, "-m", "Retry").returncode == 0
    assert message(hooked_repo) == f"Retry\n\nWhy:\n{REASON}\n\nObversa-Record: implement\n"


def test_what_is_composed_ahead_is_scrubbed_before_it_is_written(hooked_repo):
    key = "AKIA" + "Z7Q2LMNO4PRS6TUV"
    note = f"Rotated the deploy key {key} because it leaked into a log."
    assert obversa("record", "note", note, cwd=hooked_repo).returncode == 0
    store = TurnStore.for_worktree(hooked_repo)
    composed = (store.directory / COMPOSED).read_text()
    assert "Rotated the deploy key" in composed and key not in composed
    change(hooked_repo)
    assert commit(hooked_repo, "-m", "Rotate").returncode == 0
    assert "Rotated the deploy key" in message(hooked_repo)
    assert key not in message(hooked_repo)


@pytest.fixture
def hooked_repo(repo: Path) -> Path:
    assert obversa("install", cwd=repo).returncode == 0
    return repo


def test_the_commit_time_path_imports_next_to_nothing(hooked_repo, tmp_path):
    from git_obversa.hooks.install import LEAN_ENTRY

    assert (
        obversa("record", "note", "--stage", "implement", REASON, cwd=hooked_repo).returncode == 0
    )
    (tmp_path / "msg").write_text("Retry\n")
    python, package = (hooked_repo / RUNTIME).read_text().splitlines()
    completed = subprocess.run(  # exactly what the shim runs, with an import profile
        [python, "-I", "-S", "-X", "importtime", "-c", LEAN_ENTRY, package, ".git"]
        + ["prepare-commit-msg", str(tmp_path / "msg"), "message"],
        cwd=hooked_repo,
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, completed.stderr
    imported = {line.split("|")[-1].strip() for line in completed.stderr.splitlines()}
    assert "git_obversa.hooks.commit" in imported
    heavy = {"re", "json", "pathlib", "subprocess", "textwrap", "contextlib", "importlib"}
    assert not {name.split(".")[0] for name in imported} & heavy
    ours = {name for name in imported if name.startswith("git_obversa.record.")}
    assert ours == {
        "git_obversa.record.composition",  # the lean half: reading what was composed ahead
        "git_obversa.record.message",
        "git_obversa.record.pending",
    }
    written = (tmp_path / "msg").read_text()
    assert re.search(r"\nObversa-Record-Id: [0-9a-f]{16}\n$", written)
    assert without_record_ids(written) == f"Retry\n\nWhy:\n{REASON}\n\nObversa-Record: implement\n"


# A message each: (text, whether the shim writes it in sh; else it leaves it to Python).
SHAPES = [
    ("Subject", True),
    ("Subject\n", True),
    ("Subject\n\nBody line one.\nBody line two.\n", True),
    ("Subject\n\n\n\nBody\n\n\n", True),
    ("Subject\n\nBody\n\nSigned-off-by: A <a@example.com>\n", True),
    ("Fix 🤖 émoji\n\n🤖 Generated with Claude Code\n\nCo-Authored-By: C <c@example.com>\n", True),
    ("Subject\n\nBody\n\nKey: value\n  continued\nOther-Key : v\n", True),
    ("Subject\n\nNot a trailer: but prose here\nand more prose\n", True),
    ("Subject\n\nFixes: #12\nsome prose\nSigned-off-by: A <a@example.com>\n", True),
    ("Subject\n\nprose a\nprose b\nprose c\nprose d\nSigned-off-by: A <a@example.com>\n", True),
    ("Subject\n\n  indented first\nKey: v\n", True),
    ("Subject: with a colon\n", True),
    ("\nSubject after a blank line\n", True),
    ("\n\nKey: v\n", True),
    ("Subject\n\n    indented code\n\tTabbed: x\n", True),
    ("Subject\n\n  \t  \nBody after a blank-looking line\n", True),
    ("Subject\n\nBody\n\n(cherry picked from commit 1234abc)\nprose\n", True),
    ("Subject\n\nA:b\n:c\n", True),
    ("Subject\n\nKey:\n", True),
    ("Subject\n\nBody\n\nSigned-off-by: A <a@example.com>\n\n\n", True),
    ("Subject\n\n---\n", False),  # no letter or digit: blank by Python's rule or not
    ("Subject\n\n\u00a0\n", False),
    ("Subject\r\n\r\nBody\r\n", False),
    ("Subject\n\nWhy:\nAn older reason.\n", False),
    ("Subject\n\n# a line git would strip\n", False),
    ("Subject\n\nObversa-Record: implement\n", False),
    ("Subject\n" + "more\n" * 250, False),
]


def test_the_shim_writes_a_plain_message_as_python_would(hooked_repo, tmp_path):
    from git_obversa.hooks.commit import add_reasoning

    log = import_log(hooked_repo, tmp_path)
    store = TurnStore.for_worktree(hooked_repo)
    shim = hooked_repo / ".git" / "hooks" / "prepare-commit-msg"
    message_file = tmp_path / "message"
    for text, in_sh in SHAPES:
        store.discard()
        for name in ("claim", "claimed.jsonl"):
            (store.directory / name).unlink(missing_ok=True)
        log.unlink(missing_ok=True)
        varied_turns(hooked_repo)
        expected = add_reasoning(text, store.read(), hooked_repo)  # what Python writes
        assert compose_ahead(store.directory, hooked_repo)
        message_file.write_bytes(text.encode())
        completed = subprocess.run(
            [str(shim), str(message_file), "message"], cwd=hooked_repo, capture_output=True
        )
        assert completed.returncode == 0, completed.stderr
        written = message_file.read_bytes().decode()
        assert without_record_ids(written) == without_record_ids(expected), text
        assert len(re.findall(r"^Obversa-Record-Id: [0-9a-f]{16}$", written, re.M)) == 1, text
        assert log.exists() != in_sh, text
        assert not store.turns_file.exists() and store.claimed_file.exists(), text


def test_a_turn_captured_while_the_shim_claims_is_carried_or_stays_pending(hooked_repo, tmp_path):
    """Real processes racing: whatever the shim claimed is in the message it wrote (so
    post-commit may drop it), and the turn captured meanwhile is in one or the other."""
    store = TurnStore.for_worktree(hooked_repo)
    shim = hooked_repo / ".git" / "hooks" / "prepare-commit-msg"
    message_file = tmp_path / "message"
    append = (  # ready once imported; appends DELAY seconds after its go
        "import sys, time\n"
        "from git_obversa.record.turns import TurnStore\n"
        "print('ready', flush=True); sys.stdin.readline(); time.sleep(float(sys.argv[2]))\n"
        "TurnStore(sys.argv[1]).append([{'stage': 'implement', 'node': 'implement',"
        " 'kind': 'note', 'text': sys.argv[3]}])\n"
    )
    for round in range(8):
        store.discard()
        for name in ("claim", "claimed.jsonl"):
            (store.directory / name).unlink(missing_ok=True)
        capture(hooked_repo, REASON)
        assert compose_ahead(store.directory, hooked_repo)
        message_file.write_text("Retry\n")
        late = f"Late note {round}."
        appender = subprocess.Popen(
            [sys.executable, "-c", append, str(store.directory), str(round * 0.003), late],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert appender.stdout.readline() == "ready\n"
        appender.stdin.write("go\n")
        appender.stdin.close()
        completed = subprocess.run([str(shim), str(message_file), "message"], cwd=hooked_repo)
        assert appender.wait() == 0 and completed.returncode == 0
        written = message_file.read_text()
        claimed = [json.loads(line)["text"] for line in store.claimed_file.read_text().splitlines()]
        still = [turn["text"] for turn in store.read() if turn["text"] not in claimed]
        assert all(text in written for text in claimed), (round, written, claimed)
        assert (late in written) != (late in still), (round, written, still)
