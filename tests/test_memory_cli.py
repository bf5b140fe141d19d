"""`git obversa memory`: the real CLI in real repositories."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess

import pytest

from tests.gitutil import git, log_git_calls, make_repo, obversa

pytest.importorskip("git_obversa.memory.git_memory")


def memory(*args, cwd, input=None):
    return obversa("memory", *args, cwd=cwd, input=input)


def succeeded(completed):
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr == ""
    return completed.stdout


def test_create_then_view_with_line_numbers(repo):
    out = succeeded(memory("create", "/memories/notes/plan.md", "first\nsecond\nthird\n", cwd=repo))
    assert out == "Created /memories/notes/plan.md (19 bytes)\n"
    out = succeeded(memory("view", "/memories/notes/plan.md", cwd=repo))
    assert out == "     1\tfirst\n     2\tsecond\n     3\tthird\n"
    out = succeeded(memory("view", "notes/plan.md", "--range", "2", "-1", cwd=repo))
    assert out == "     2\tsecond\n     3\tthird\n"
    out = succeeded(memory("create", "notes/plan.md", "new", cwd=repo))
    assert out == "Overwrote /memories/notes/plan.md (3 bytes)\n"


def test_directory_view_lists_entries_with_directories_marked(repo):
    for path in ("z.md", "a/file.txt", "b.json"):
        succeeded(memory("create", path, "x", cwd=repo))
    assert succeeded(memory("view", cwd=repo)) == "/memories/a/\n/memories/b.json\n/memories/z.md\n"
    assert succeeded(memory("view", "/memories/a", cwd=repo)) == "/memories/a/file.txt\n"


def test_text_from_stdin_with_dash_or_omitted(repo):
    succeeded(memory("create", "a.md", "-", cwd=repo, input="from\nstdin\n"))
    succeeded(memory("create", "b.md", cwd=repo, input="omitted\n"))
    succeeded(memory("insert", "b.md", "0", cwd=repo, input="zero\n"))
    assert succeeded(memory("view", "a.md", cwd=repo)) == "     1\tfrom\n     2\tstdin\n"
    assert succeeded(memory("view", "b.md", cwd=repo)) == "     1\tzero\n     2\tomitted\n"


def test_edit_verbs_print_one_line_confirmations(repo):
    succeeded(memory("create", "a/one.md", "one two", cwd=repo))
    out = succeeded(memory("str-replace", "a/one.md", "one", "three", cwd=repo))
    assert out == "Edited /memories/a/one.md (9 bytes)\n"
    out = succeeded(memory("insert", "a/one.md", "1", "four", cwd=repo))
    assert out == "Inserted at line 1 of /memories/a/one.md (15 bytes)\n"
    out = succeeded(memory("rename", "/memories/a", "/memories/b", cwd=repo))
    assert out == "Renamed /memories/a to /memories/b (1 file)\n"
    out = succeeded(memory("delete", "/memories/b", cwd=repo))
    assert out == "Deleted /memories/b (1 file, 15 bytes)\n"
    emptied = memory("view", cwd=repo)
    assert (emptied.returncode, emptied.stdout) == (0, "")
    assert emptied.stderr.startswith("/memories is empty in scope default; ")


def test_evictions_are_named(repo):
    limits = ["--limits", '{"max_files": 1}']
    succeeded(memory("create", "a.md", "a", *limits, cwd=repo))
    out = succeeded(memory("create", "b.md", "b", *limits, cwd=repo))
    assert out == "Created /memories/b.md (1 byte); evicted /memories/a.md\n"


def test_errors_are_one_line_with_the_code(repo):
    completed = memory("view", "/memories/x.md", cwd=repo)
    assert completed.returncode == 1
    assert completed.stdout == ""
    assert completed.stderr == (
        "git obversa memory: NOT_FOUND: The memory path does not exist. (/memories/x.md)\n"
    )
    completed = memory("create", "code.ts", "x", cwd=repo)
    assert completed.returncode == 1
    assert completed.stderr.startswith("git obversa memory: INVALID_EXTENSION: ")
    assert len(completed.stderr.splitlines()) == 1


def test_json_on_every_verb(repo):
    def run(*args):
        completed = memory(*args, "--json", cwd=repo)
        assert completed.returncode == 0, completed.stderr
        return json.loads(completed.stdout)

    created = run("create", "a.md", "one\ntwo\n")
    assert created == {
        "ok": True,
        "command": "create",
        "value": {"path": "/memories/a.md", "byte_length": 8, "evicted": [], "overwritten": False},
    }
    assert run("view", "a.md", "-r", "2", "2")["value"]["lines"] == {
        "start": 2,
        "end": 2,
        "total": 2,
    }
    assert run("str-replace", "a.md", "two", "2")["value"]["byte_length"] == 6
    assert run("insert", "a.md", "2", "three")["value"]["path"] == "/memories/a.md"
    assert run("rename", "a.md", "b.md")["value"]["moved_files"] == 1
    assert run("view")["value"]["entries"] == [
        {"name": "b.md", "path": "/memories/b.md", "kind": "file"}
    ]
    assert run("delete", "b.md")["value"] == {
        "path": "/memories/b.md",
        "kind": "file",
        "deleted_files": 1,
        "freed_bytes": 12,
    }
    scopes = run("scopes")
    assert [scope["files"] for scope in scopes] == [0]

    failed = memory("view", "b.md", "--json", cwd=repo)
    assert failed.returncode == 1
    assert json.loads(failed.stdout)["error"]["code"] == "NOT_FOUND"
    assert "NOT_FOUND" in failed.stderr


def test_scope_from_flag_then_git_config_then_default(repo):
    succeeded(memory("create", "a.md", "default scope", cwd=repo))
    succeeded(memory("create", "a.md", "team scope", "--scope", "team", cwd=repo))
    git(repo, "config", "obversa.scope", "team")
    assert succeeded(memory("view", "a.md", cwd=repo)) == "     1\tteam scope\n"
    out = succeeded(memory("view", "a.md", "--scope", "default", cwd=repo))
    assert out == "     1\tdefault scope\n"
    listed = succeeded(memory("scopes", cwd=repo)).splitlines()
    team = hashlib.sha256(b"team").hexdigest()
    default = hashlib.sha256(b"default").hexdigest()
    assert len(listed) == 2
    marked = [line for line in listed if line.startswith("*")]
    assert marked and f"team ({team[:12]})" in marked[0]
    assert any(
        f"default ({default[:12]})" in line and "1 file" in line and "13 bytes" in line
        for line in listed
    )


def test_a_one_shot_command_asks_git_two_questions(repo, tmp_path, monkeypatch):
    # Where the store is (rev-parse) and what the store and the scope are configured as
    # (one `git config`): two git processes, when the environment changes nothing git
    # reads; with `git -c`'s variable the configured scope is asked on its own, as ever.
    succeeded(memory("create", "a.md", "team text", "--scope", "team", cwd=repo))
    succeeded(memory("create", "a.md", "default text", cwd=repo))
    git(repo, "config", "obversa.scope", "team")
    exec_path = git(repo, "--exec-path").strip()
    log = log_git_calls(tmp_path, monkeypatch)
    for name in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM"):  # as a user's shell has it
        monkeypatch.delenv(name)

    def run(*args: str, **variables: str) -> tuple[str, list[str]]:
        log.write_text("")
        env = {**os.environ, "GIT_EXEC_PATH": exec_path, **variables}
        # The program itself (not through `git obversa`, which puts git's own directory
        # first on PATH, before the logging git).
        completed = subprocess.run(
            ["git-obversa", "memory", *args], cwd=repo, capture_output=True, text=True, env=env
        )
        assert completed.returncode == 0, completed.stderr
        return completed.stdout, log.read_text().splitlines()

    out, calls = run("view", "a.md")
    assert out == "     1\tteam text\n"
    # Started milliseconds apart, their logging shells may write in either order.
    assert len(calls) == 2, calls
    assert sorted("rev-parse" in call for call in calls) == [False, True], calls
    assert any("obversa\\.scope" in call for call in calls), calls
    out, calls = run("str-replace", "a.md", "team", "the team's")
    assert out == "Edited /memories/a.md (15 bytes)\n" and len(calls) == 2
    out, calls = run("view", "a.md", "--scope", "default")
    assert out == "     1\tdefault text\n" and len(calls) == 2

    out, calls = run("view", "a.md", GIT_CONFIG_PARAMETERS="'obversa.scope'='default'")
    assert out == "     1\tdefault text\n"
    assert len(calls) == 3 and "config --get obversa.scope" in calls


def test_exec_answers_each_line_as_it_arrives(repo):
    process = subprocess.Popen(
        ["git", "obversa", "memory", "exec", "--scope", "agent"],
        cwd=repo,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        # One line in, one line out, with stdin still open: the result was flushed.
        process.stdin.write('{"command": "create", "path": "/memories/a.md", "file_text": "hi"}\n')
        process.stdin.flush()
        first = json.loads(process.stdout.readline())
        assert first["ok"] is True and first["value"]["byte_length"] == 2
        process.stdin.write('{"command": "view", "path": "/memories/a.md"}\n')
        process.stdin.flush()
        assert json.loads(process.stdout.readline())["value"]["text"] == "hi"
    finally:
        process.stdin.close()
        assert process.wait(timeout=30) == 0
    assert process.stdout.read() == ""


def test_exec_survives_bad_lines(repo):
    lines = [
        '{"command": "create", "path": "/memories/a.md", "text": "camel"}',
        "not json",
        "",
        "[1, 2]",
        '{"command": "write"}',
        '{"command": "view", "path": "/memories/a.md"}',
        '{"command": "create", "path": "/memories/e.md", "file_text": "\\ud800"}',
        '{"command": "create", "path": "/memories/u.md", "file_text": "🧠 ünïcode"}',
        "[" * 100000,
        '{"command": "view", "path": "/memories/u.md"}',
    ]
    completed = memory("exec", cwd=repo, input="\n".join(lines) + "\n")
    assert completed.returncode == 0, completed.stderr
    results = [json.loads(line) for line in completed.stdout.splitlines()]
    assert len(results) == 9  # the blank line is skipped
    assert results[0]["ok"] is True
    assert results[1]["command"] == "unknown"
    assert results[1]["error"]["code"] == "INVALID_COMMAND"
    assert results[2]["error"]["code"] == "INVALID_COMMAND"
    assert results[3] == {
        "ok": False,
        "command": "write",
        "error": {"code": "INVALID_COMMAND", "message": results[3]["error"]["message"]},
    }
    assert results[4]["value"]["text"] == "camel"
    assert results[5]["error"]["code"] == "INVALID_ARGUMENT"
    assert results[6]["value"]["byte_length"] == len("🧠 ünïcode".encode())
    assert results[7]["error"]["code"] == "INVALID_COMMAND"
    assert results[8]["value"]["text"] == "🧠 ünïcode"


def test_exec_ends_quietly_when_the_reader_goes_away(repo):
    # `head -1` reads one result and closes the pipe; exec must not print a traceback.
    view_root = '{"command": "view", "path": "/memories"}\n' * 5000
    completed = subprocess.run(
        ["bash", "-c", "git obversa memory exec | head -1; echo ${PIPESTATUS[0]} >&2"],
        cwd=repo,
        input=view_root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert json.loads(completed.stdout)["ok"] is True
    assert completed.stderr == "0\n"


def test_exec_limits_apply(repo):
    commands = [
        {"command": "create", "path": f"/memories/{name}.md", "file_text": name}
        for name in ("a", "b", "c")
    ]
    stdin = "".join(json.dumps(command) + "\n" for command in commands)
    completed = memory("exec", "--limits", '{"max_files": 2}', cwd=repo, input=stdin)
    results = [json.loads(line) for line in completed.stdout.splitlines()]
    assert [result["value"]["evicted"] for result in results] == [[], [], ["/memories/a.md"]]


def repository_state(repo):
    """What a user sees of HEAD, index, branches, status and the worktree's top level."""
    return {
        "head": git(repo, "rev-parse", "HEAD"),
        "symbolic": git(repo, "symbolic-ref", "HEAD"),
        "index": git(repo, "ls-files", "--stage"),
        "status": git(repo, "status", "--porcelain=v1"),
        "branches": git(repo, "for-each-ref", "refs/heads", "refs/tags"),
        "files": sorted(p.name for p in repo.iterdir()),
    }


def test_cli_writes_leave_head_index_worktree_and_status_alone(repo):
    (repo / "dirty.txt").write_text("untracked\n")
    (repo / "README.md").write_text("changed, not staged\n")
    before = repository_state(repo)
    exec_input = (
        '{"command": "create", "path": "/memories/e.md", "file_text": "exec"}\n'
        '{"command": "delete", "path": "/memories/e.md"}\n'
    )
    for args, stdin in (
        (("create", "a/one.md", "1\n2\n"), None),
        (("str-replace", "a/one.md", "2", "3"), None),
        (("insert", "a/one.md", "0", "0"), None),
        (("rename", "a", "b"), None),
        (("create", "c.md", "c"), None),
        (("delete", "c.md"), None),
        (("exec",), exec_input),
    ):
        succeeded(memory(*args, cwd=repo, input=stdin))
    assert repository_state(repo) == before
    assert (repo / "README.md").read_text() == "changed, not staged\n"
    assert succeeded(memory("view", "b/one.md", cwd=repo)) == "     1\t0\n     2\t1\n     3\t3\n"
    ref = "refs/obversa/memory/v1/" + hashlib.sha256(b"default").hexdigest()
    assert git(repo, "cat-file", "-t", ref).strip() == "tree"
    fsck = subprocess.run(["git", "fsck", "--full", "--strict"], cwd=repo, capture_output=True)
    assert fsck.returncode == 0, fsck.stderr


def test_works_from_a_subdirectory_a_linked_worktree_and_a_bare_repository(repo, tmp_path):
    (repo / "sub").mkdir()
    succeeded(memory("create", "a.md", "from sub", cwd=repo / "sub"))
    assert succeeded(memory("view", "a.md", cwd=repo)) == "     1\tfrom sub\n"
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "side", str(linked))
    succeeded(memory("str-replace", "a.md", "sub", "a worktree", cwd=linked))
    assert succeeded(memory("view", "a.md", cwd=repo)) == "     1\tfrom a worktree\n"
    bare = make_repo(tmp_path / "bare.git", "--bare")
    succeeded(memory("create", "a.md", "bare", cwd=bare))
    assert succeeded(memory("view", "a.md", cwd=bare)) == "     1\tbare\n"


def test_usage_errors_exit_2(repo):
    completed = memory(cwd=repo)
    assert completed.returncode == 2
    assert "view" in completed.stderr and "exec" in completed.stderr
    completed = memory("exec", "--limits", "{not json", cwd=repo)
    assert completed.returncode == 2
    assert "invalid limits" in completed.stderr
    completed = memory("view", "--limits", '{"max_files": 0}', cwd=repo)
    assert completed.returncode == 2
    assert "max_files must be a positive safe integer" in completed.stderr


def test_outside_a_repository_is_a_handled_failure(tmp_path):
    completed = memory("view", cwd=tmp_path)
    assert completed.returncode == 1
    assert completed.stderr.startswith("git obversa memory: ")
    assert len(completed.stderr.splitlines()) == 1


def test_help_teaches_with_examples(repo):
    out = succeeded(memory("-h", cwd=repo))
    for verb in ("view", "create", "str-replace", "insert", "delete", "rename", "exec", "scopes"):
        assert verb in out
    out = succeeded(memory("exec", "--help", cwd=repo))
    assert "examples:" in out and "--limits" in out and "--scope" in out
