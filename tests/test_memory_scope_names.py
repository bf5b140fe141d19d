"""A scope name means the same everywhere (issue 27): `--scope X` opens the scope NAMED X
in the CLI, `exec`, MCP (tests/test_mcp_server.py) and the API; a digest prefix only
as `--scope-digest` (`names.by_digest` from Python), and an ambiguous one is refused."""

from __future__ import annotations

import json
import subprocess

from git_obversa.memory.git_memory import list_scopes, open_git_memory, open_scope, scope_digest
from git_obversa.memory.names import by_digest
from tests.gitutil import make_repo, obversa

HEXLIKE = "2c26b46b"  # how the digest of "foo" starts


def files_of(repo, scope: str) -> dict[str, str]:
    memory = open_git_memory(str(repo), scope)
    listing = memory.execute({"command": "view", "path": "/memories"})
    if not listing["ok"]:
        return {}
    found = {}
    for entry in listing["value"]["entries"]:
        viewed = memory.execute({"command": "view", "path": entry["path"]})
        found[entry["path"]] = viewed["value"]["text"]
    return found


def test_a_hex_looking_name_is_that_name_in_the_cli_exec_and_the_api(tmp_path):
    assert scope_digest("foo").startswith(HEXLIKE)
    repo = make_repo(tmp_path / "repo")
    done = obversa("memory", "create", "/memories/foo.md", "foo", "--scope", "foo", cwd=repo)
    assert done.returncode == 0, done.stderr

    done = obversa("memory", "create", "/memories/cli.md", "cli", "--scope", HEXLIKE, cwd=repo)
    assert done.returncode == 0, done.stderr
    command = {"command": "create", "path": "/memories/exec.md", "file_text": "exec"}
    done = obversa("memory", "exec", "--scope", HEXLIKE, cwd=repo, input=json.dumps(command))
    assert done.returncode == 0 and json.loads(done.stdout)["ok"], done.stdout + done.stderr
    api = {"command": "create", "path": "/memories/api.md", "file_text": "api"}
    assert open_scope(str(repo), HEXLIKE).execute(api)["ok"]
    assert open_git_memory(str(repo), HEXLIKE).execute(
        {"command": "create", "path": "/memories/port.md", "file_text": "port"}
    )["ok"]

    assert files_of(repo, "foo") == {"/memories/foo.md": "foo"}  # never written into
    assert files_of(repo, HEXLIKE) == {
        "/memories/api.md": "api",
        "/memories/cli.md": "cli",
        "/memories/exec.md": "exec",
        "/memories/port.md": "port",
    }
    named = {scope["name"]: scope["digest"] for scope in list_scopes(str(repo))}
    assert named == {"foo": scope_digest("foo"), HEXLIKE: scope_digest(HEXLIKE)}

    # By digest, in the spelling that cannot be a name: foo.
    viewed = obversa("memory", "view", "/memories/foo.md", "--scope-digest", HEXLIKE, cwd=repo)
    assert viewed.returncode == 0 and viewed.stdout.rstrip().endswith("foo"), viewed.stderr
    assert open_scope(str(repo), by_digest(HEXLIKE)).scope == "foo"


def test_a_digest_prefix_two_scopes_share_is_refused_and_an_unknown_one_said(tmp_path):
    repo = make_repo(tmp_path / "repo")
    shared, first, second = None, None, None
    seen: dict[str, str] = {}
    for index in range(100000):  # two names whose digests share six leading digits
        name = f"s{index}"
        prefix = scope_digest(name)[:6]
        if prefix in seen:
            shared, first, second = prefix, seen[prefix], name
            break
        seen[prefix] = name
    for name in (first, second):
        done = obversa("memory", "create", "/memories/a.md", name, "--scope", name, cwd=repo)
        assert done.returncode == 0, done.stderr
    refused = obversa("memory", "view", "/memories/a.md", "--scope-digest", shared, cwd=repo)
    assert refused.returncode == 1 and "give more digits" in refused.stderr
    assert first in refused.stderr and second in refused.stderr
    unknown = obversa("memory", "log", "--scope", "abcdef12", cwd=repo)
    assert unknown.returncode == 1 and "--scope-digest abcdef12" in unknown.stderr
    both = obversa("memory", "view", "/memories", "--scope", "x", "--scope-digest", shared,
                   cwd=repo)  # fmt: skip
    assert both.returncode != 0 and "not both" in both.stderr


def test_the_conformance_kit_leaves_no_scope_behind(tmp_path):
    from git_obversa import run_memory_conformance

    repo = make_repo(tmp_path / "repo")
    done = obversa("memory", "create", "/memories/mine.md", "mine", "--scope", "mine", cwd=repo)
    assert done.returncode == 0, done.stderr
    report = run_memory_conformance(lambda scope, limits: open_git_memory(str(repo), scope, limits))
    assert report == {"ok": True, "cases": 17, "failures": []}
    assert [scope["name"] for scope in list_scopes(str(repo))] == ["mine"]
    left = subprocess.run(["git", "for-each-ref", "refs/obversa/"], cwd=repo,
                          capture_output=True, text=True).stdout  # fmt: skip
    assert "conformance" not in left and len(left.splitlines()) == 3  # mine: scope, name, history
    assert files_of(repo, "mine") == {"/memories/mine.md": "mine"}


def test_memory_scopes_counts_what_each_scope_holds_now(tmp_path):
    # The listing keeps what it read by object id: a changed scope is read again.
    repo = make_repo(tmp_path / "repo")
    for text in ("a", "bb"):
        done = obversa("memory", "create", f"/memories/{text}.md", text, "--scope", "s", cwd=repo)
        assert done.returncode == 0, done.stderr
        (listed,) = json.loads(obversa("memory", "scopes", "--json", cwd=repo).stdout)
        assert (listed["name"], listed["files"]) == ("s", len(text))
    assert (repo / ".git" / "obversa" / "scope-list.json").exists()
    (repo / ".git" / "obversa" / "scope-list.json").write_text('{"x": ')  # damaged: ignored
    (listed,) = json.loads(obversa("memory", "scopes", "--json", cwd=repo).stdout)
    assert (listed["files"], listed["bytes"]) == (2, 3)
