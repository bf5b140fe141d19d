"""`git obversa why`, `blame` and `log` end to end, and how many git processes they cost."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from git_obversa.lookup.why import reasoned_log, why
from tests.gitutil import git, obversa
from tests.test_lookup_why import FLOOR_MESSAGE, commit, reason


@pytest.fixture
def history(repo: Path) -> Path:
    commit(repo, reason("Add config", "Defaults must work offline."), **{"c.txt": "a\nb\nc\n"})
    commit(repo, "Bump b\n\nNo reason given.\n", **{"c.txt": "a\nB\nc\n"})
    return repo


def test_why_text_shows_each_commit_with_its_reasoning(history):
    completed = obversa("why", "c.txt", cwd=history)
    assert completed.returncode == 0, completed.stderr
    out = completed.stdout
    first, second = out.split("\n\ncommit ")
    assert "(lines 1, 3 of c.txt)" in first and "Author: Test Author <author@example.com>" in first
    assert "    Add config\n\n    Why:\n    Defaults must work offline." in first
    assert second.split(" ")[1] == "(line"
    assert "(no recorded reasoning; the commit body follows)\n    No reason given." in second


def test_why_one_line_and_json(history):
    completed = obversa("why", "c.txt:2", "--json", cwd=history)
    data = json.loads(completed.stdout)
    assert (data["path"], data["rev"]) == ("c.txt", None)
    [owner] = data["commits"]
    assert owner["subject"] == "Bump b" and owner["reasoning"] is None
    assert owner["ranges"] == [[2, 2]] and owner["paths"] == ["c.txt"]
    assert set(owner) >= {"commit", "author", "email", "date", "body"}
    older = json.loads(obversa("why", "c.txt:1-3", "--rev", "HEAD~1", "--json", cwd=history).stdout)
    assert [c["reasoning"] for c in older["commits"]] == ["Defaults must work offline."]


def test_why_reads_the_working_tree_unless_given_a_revision(history):
    (history / "c.txt").write_text("new first line\na\nB\nc\n")
    data = json.loads(obversa("why", "c.txt:1-2", "--json", cwd=history).stdout)
    assert [(c["commit"][:8], c["subject"], c["ranges"]) for c in data["commits"]] == [
        ("00000000", "Not committed yet", [[1, 1]]),
        (data["commits"][1]["commit"][:8], "Add config", [[2, 2]]),
    ]
    committed = json.loads(obversa("why", "c.txt:1", "--rev", "HEAD", "--json", cwd=history).stdout)
    assert committed["commits"][0]["subject"] == "Add config"


def test_why_from_a_subdirectory_uses_paths_relative_to_it(history):
    commit(history, reason("Nested", "Lives below."), **{"sub__n.txt": "x\n"})
    completed = obversa("why", "n.txt", "--json", cwd=history / "sub")
    assert json.loads(completed.stdout)["commits"][0]["reasoning"] == "Lives below."


def test_why_errors_are_one_line_exit_1(history, tmp_path):
    (history / "b.bin").write_bytes(b"\x00\x01\x02\nmore\n")
    git(history, "add", "b.bin")
    git(history, "commit", "-qm", "binary")
    outside = tmp_path / "outside.txt"
    outside.write_text("x\n")
    for args, expected in [
        (["b.bin"], "b.bin is a binary file"),
        (["missing.txt"], "missing.txt is not a file in the working tree"),
        (["missing.txt", "--rev", "HEAD"], "missing.txt is not a file in HEAD"),
        ([str(outside)], "outside repository"),
        (["../outside.txt"], "outside repository"),
        (["c.txt:9"], "c.txt has only 3 lines; line 9 is past the end"),
        (["c.txt", "--rev", "nope"], "nope"),
    ]:
        completed = obversa("why", *args, cwd=history)
        assert completed.returncode == 1, (args, completed.stdout)
        assert completed.stderr.count("\n") == 1, completed.stderr
        assert completed.stderr.startswith("git obversa why: ") and expected in completed.stderr
        assert completed.stdout == ""


def test_why_usage_errors_exit_2(history):
    for args in (["c.txt:0"], ["c.txt:3-2"], ["c.txt", "-CCCC"], []):
        assert obversa("why", *args, cwd=history).returncode == 2, args


def test_why_range_past_the_end_stops_at_the_last_line(history):
    data = json.loads(obversa("why", "c.txt:2-50", "--json", cwd=history).stdout)
    assert [c["ranges"] for c in data["commits"]] == [[[2, 2]], [[3, 3]]]


def test_why_outside_a_repository(tmp_path):
    (tmp_path / "f.txt").write_text("x\n")
    completed = obversa("why", "f.txt", cwd=tmp_path)
    assert completed.returncode == 1 and "not a git repository" in completed.stderr


def test_help_teaches_with_examples(history):
    for command in ("why", "blame", "log"):
        completed = obversa(command, "--help", cwd=history)
        assert completed.returncode == 0 and "examples:" in completed.stdout


def test_blame_has_a_reasoning_column(history):
    git(history, "config", "core.autocrlf", "false")
    (history / "w.txt").write_bytes(b"crlf line\r\n")
    git(history, "add", "w.txt")
    git(history, "commit", "-q", "-F", "-", input=reason("CRLF", "Kept as written."))
    lines = obversa("blame", "c.txt", cwd=history).stdout.splitlines()
    assert len(lines) == 3
    sha = git(history, "rev-parse", "HEAD~2").strip()
    assert lines[0].startswith(f"{sha[:8]} (Test Author ")
    assert "Defaults must work offline." in lines[0] and lines[0].endswith(" 1) a")
    assert " - " in lines[1] and lines[1].endswith(" 2) B")
    assert lines[0].index(" 1) ") == lines[1].index(" 2) ")  # columns line up
    assert obversa("blame", "w.txt", cwd=history).stdout.endswith("1) crlf line\n")
    data = json.loads(obversa("blame", "c.txt:2-3", "--json", cwd=history).stdout)
    assert [(line["line"], line["text"]) for line in data["lines"]] == [(2, "B"), (3, "c")]
    assert {c["commit"] for c in data["commits"]} == {line["commit"] for line in data["lines"]}


def test_log_lists_commits_with_reasoning_newest_first(history):
    commit(history, FLOOR_MESSAGE, **{"d.txt": "d\n"})
    out = obversa("log", cwd=history).stdout
    assert out.index("record(implement): pass") < out.index("Add config")
    assert "Bump b" not in out and "    Why:\n    Defaults must work offline." in out
    data = json.loads(obversa("log", "-n", "1", "--json", cwd=history).stdout)
    assert [c["subject"] for c in data["commits"]] == ["record(implement): pass"]
    data = json.loads(obversa("log", "c.txt", "--json", cwd=history).stdout)
    assert [c["subject"] for c in data["commits"]] == ["Add config"]
    empty = obversa("log", "README.md", cwd=history)
    assert empty.returncode == 0 and "no commit here records reasoning" in empty.stdout


# --- process counting: a `git` on PATH that logs each invocation, then runs the real one


@pytest.fixture
def logged_git(tmp_path, monkeypatch) -> Path:
    real = shutil.which("git")
    bindir = tmp_path / "logged-bin"
    bindir.mkdir()
    log = tmp_path / "git-invocations.log"
    wrapper = bindir / "git"
    # The command's name: the first argument that is no option (nor `-C`'s directory).
    wrapper.write_text(
        '#!/bin/sh\nskip=\nfor word in "$@"; do\n'
        '  if [ -n "$skip" ]; then skip=; continue; fi\n'
        '  case "$word" in -C) skip=1 ;; -*) ;; *) printf "%s\\n" "$word" >> '
        f'"{log}"; break ;; esac\ndone\nexec "{real}" "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return log


def many_commits(repo: Path, count: int) -> None:
    """COUNT commits, each the last to change its own line of many.txt, with fast-import."""
    stream = []
    lines: list[str] = []
    for number in range(count):
        lines.append(f"line {number}")
        data = "".join(line + "\n" for line in lines)
        message = reason(f"Line {number}", f"Reason {number}.")
        stream.append(
            f"commit refs/heads/main\ncommitter A <a@b.c> {1700000000 + number} +0000\n"
            f"data {len(message.encode())}\n{message}\n"
            + ("from refs/heads/main^0\n" if number == 0 else "")
            + f"M 100644 inline many.txt\ndata {len(data.encode())}\n{data}\n"
        )
    git(repo, "fast-import", "--quiet", input="".join(stream))
    git(repo, "reset", "-q", "--hard")


def test_one_blame_and_one_batched_read_per_call(repo, logged_git):
    many_commits(repo, 40)
    # Without the blame cache (tests/test_lookup_blame.py counts the cached lookups).
    logged_git.write_text("")
    result = why(repo, "many.txt", cache=False)
    assert len(result) == 40 and result[39].reasoning == "Reason 39."
    # The two run side by side (the reader starts with blame), so their order is free.
    assert sorted(logged_git.read_text().split()) == ["blame", "cat-file"]

    # The CLI: the same two processes (the console script, so git's own dispatch stays
    # out of the count) whether it reads one line or the whole file.
    for target in ("many.txt", "many.txt:7", "many.txt:3-30"):
        logged_git.write_text("")
        completed = subprocess.run(
            ["git-obversa", "why", target, "--json", "--no-cache"],
            cwd=repo,
            capture_output=True,
            text=True,
        )
        assert completed.returncode == 0, completed.stderr
        assert sorted(logged_git.read_text().split()) == ["blame", "cat-file"], target
    logged_git.write_text("")
    subprocess.run(["git-obversa", "log"], cwd=repo, capture_output=True, check=True)
    assert logged_git.read_text().split() == ["log"]


def test_more_commits_than_a_pipe_holds_ids_for(repo):
    # 1,700 commit ids are 70 kB of input to `git cat-file`, more than a pipe buffers
    # (64 kB): the reader must take them while it writes, without a deadlock.
    many_commits(repo, 1700)
    result = why(repo, "many.txt")
    assert [c.ranges for c in result] == [((n, n),) for n in range(1, 1701)]
    assert [c.reasoning for c in result[::567]] == ["Reason 0.", "Reason 567.", "Reason 1134."]
    data = json.loads(obversa("why", "many.txt", "--json", cwd=repo).stdout)
    assert len(data["commits"]) == 1700 and data["commits"][-1]["reasoning"] == "Reason 1699."


def test_without_memfd_the_reader_writes_to_a_temporary_file(history, monkeypatch):
    # Systems without memfd_create (macOS) get an unnamed temporary file instead.
    expected = [c.to_json() for c in why(history, "c.txt")]
    monkeypatch.delattr("os.memfd_create", raising=False)
    assert [c.to_json() for c in why(history, "c.txt")] == expected


def test_empty_file_has_no_lines_to_blame(history):
    commit(history, "Empty\n", **{"empty.txt": ""})
    assert why(history, "empty.txt") == []
    completed = obversa("why", "empty.txt", cwd=history)
    assert (completed.returncode, completed.stdout) == (0, "empty.txt has no lines to blame\n")


def test_a_colon_in_the_path_is_part_of_the_path(history):
    commit(history, reason("Odd name", "Tools write such names."), **{"odd:name.txt": "x\ny\n"})
    whole = json.loads(obversa("why", "odd:name.txt", "--json", cwd=history).stdout)
    one = json.loads(obversa("why", "odd:name.txt:2", "--json", cwd=history).stdout)
    assert (whole["path"], whole["commits"][0]["ranges"]) == ("odd:name.txt", [[1, 2]])
    assert (one["path"], one["commits"][0]["ranges"]) == ("odd:name.txt", [[2, 2]])


def test_called_in_process_the_cli_returns_instead_of_exiting(history, monkeypatch, capsys):
    # A caller of main() gets the exit status back, and its process goes on.
    from git_obversa.cli import main

    monkeypatch.chdir(history)
    assert main(["why", "c.txt:2"]) == 0
    assert "Bump b" in capsys.readouterr().out
    assert main(["why", "missing.txt"]) == 1


def test_cli_json_is_the_api_result_as_json(history):
    (history / "c.txt").write_text("new first line\na\nB\nc\n")  # the working tree, as the CLI
    data = json.loads(obversa("why", "c.txt", "--json", cwd=history).stdout)
    api = [c.to_json() for c in why(history, "c.txt", rev=None)]
    # Lines not committed yet are dated when blame runs (as git blame dates them), so
    # the two calls may fall in different seconds.
    for found in data["commits"] + api:
        if not found["commit"].strip("0"):
            found["date"] = "the time of the call"
    assert data["commits"] == api
    data = json.loads(obversa("log", "--json", cwd=history).stdout)
    assert data["commits"] == [c.to_json() for c in reasoned_log(history)]


def imported_modules(completed: subprocess.CompletedProcess) -> set[str]:
    """The modules a process run with PYTHONPROFILEIMPORTTIME=1 imported (its stderr)."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in completed.stderr.splitlines()
        if line.startswith("import time:")
    }


@pytest.mark.parametrize("args", [["why", "c.txt"], ["blame", "c.txt:1"], ["log", "-n", "1"]])
def test_the_command_imports_only_what_it_uses(history, args):
    # A fresh process per lookup: the CLI works on git_obversa.lookup.blame's plain data and
    # leaves the dataclasses of the Python API (and their import) to API callers.
    completed = obversa(*args, cwd=history, env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    assert completed.returncode == 0 and "Defaults must work offline." in completed.stdout
    modules = imported_modules(completed)
    assert "git_obversa.lookup.blame" in modules  # the profile did list the imports
    assert "dataclasses" not in modules and "git_obversa.lookup.why" not in modules
    assert "typing" not in modules  # annotations only: no process pays for the module
    # argparse's own help formatter imports shutil (and bz2, lzma) for the terminal's
    # width on every add_argument; the parser finds the width itself.
    assert not {"shutil", "bz2", "lzma"} & modules


def test_the_blame_engine_loads_without_re_or_subprocess():
    # What a lookup from the cache runs (the engine, the cache, git.py, the message
    # parser) leaves `re` (~15 ms to import on the bench machine) and `subprocess` to the
    # paths that need them, so an API caller, or any entry without argparse, is spared.
    root = Path(__file__).resolve().parents[1]
    code = (
        f"import sys; sys.path.insert(0, {str(root)!r}); import git_obversa.lookup.blame; "
        "print(sorted({'re', 'subprocess', 'typing'} & set(sys.modules)))"
    )
    completed = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, check=True
    )
    assert completed.stdout == "[]\n"


def test_a_whole_file_lookup_does_not_import_subprocess(history):
    # Answered from the blame cache, `why` spawns its three git processes with
    # os.posix_spawnp: the tens of milliseconds `import subprocess` costs stay unpaid.
    # So does a whole file's blame, cold (it fills the cache) or --no-cache.
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    for args in (["c.txt"], ["c.txt"], ["c.txt", "--no-cache"]):
        completed = obversa("why", *args, cwd=history, env=env)
        assert completed.returncode == 0 and "Defaults must work offline." in completed.stdout
        modules = imported_modules(completed)
        assert "git_obversa.lookup.cache" in modules and "subprocess" not in modules
