"""What a new user of the command line meets first (issue 29): help that is there, paths
taken as meant, empty listings that say what to run, errors that say what is allowed,
usage of the command that was mistyped, `why` across a rename, one wording outside a
repository, and `record show` on a git dir that may only be read."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.gitutil import git, obversa, rename_and_grow


def test_help_reads_the_manual_page_after_an_editable_install(repo, tmp_path):
    """Git turns `git obversa --help` into `man git-obversa`; an editable install has no
    page. `install` links the checkout's page beside the program, where man looks."""
    if shutil.which("man") is None:
        pytest.skip("no man program here")
    prefix = tmp_path / "prefix"
    (prefix / "bin").mkdir(parents=True)
    shutil.copy(shutil.which("git-obversa"), prefix / "bin" / "git-obversa")
    env = {**os.environ, "PATH": f"{prefix / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("MANPATH", None)
    env.update(MANPAGER="cat", PAGER="cat", MANWIDTH="80")
    installed = obversa("install", "--json", cwd=repo, env=env)
    assert installed.returncode == 0, installed.stderr
    for words in (["obversa", "--help"], ["help", "obversa"]):
        shown = subprocess.run(["git", *words], cwd=repo, env=env, capture_output=True, text=True)
        assert shown.returncode == 0, shown.stderr
        assert "git-obversa - keep why a change was made" in shown.stdout


def test_memories_without_the_slash_is_the_memory_root(repo):
    made = obversa("memory", "create", "memories/b.md", "-", cwd=repo, input="x\n")
    assert made.stdout == "Created /memories/b.md (2 bytes)\n"
    assert obversa("memory", "view", "/memories", cwd=repo).stdout == "/memories/b.md\n"


def test_empty_listings_say_so_and_what_to_run(repo, tmp_path):
    assert obversa("memory", "create", "/memories/a.md", "-", cwd=repo, input="x\n").returncode == 0
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    scopes = obversa("memory", "scopes", cwd=clone)
    assert scopes.returncode == 0
    assert scopes.stdout.startswith("no memory scopes in this repository yet; ")
    assert "`git obversa memory pull`" in scopes.stdout
    empty = obversa("memory", "view", cwd=clone)
    assert empty.stdout == ""  # a listing of paths: the word goes to stderr
    assert empty.stderr == (
        "/memories is empty in scope default; "
        "`git obversa memory create /memories/notes.md TEXT` writes a file\n"
    )
    log = obversa("log", cwd=clone)
    assert "`git obversa install`" in log.stdout


def test_an_invalid_name_says_which_characters_are_allowed(repo):
    refused = obversa("memory", "create", "/memories/a b.md", "-", cwd=repo, input="x\n")
    assert refused.returncode == 1
    assert refused.stderr.count("\n") == 1
    assert "invalid segment" in refused.stderr
    assert "letter or digit; then letters, digits, '.', '_', '-'" in refused.stderr


def test_no_color_has_a_help_line(repo):
    shown = obversa("why", "--help", cwd=repo).stdout
    assert re.search(r"--no-color\s+do not colour", shown), shown


def test_a_bad_option_prints_the_usage_of_its_command(repo):
    for words, usage in (
        (["memory", "view", "--bogus"], "usage: git obversa memory view "),
        (["memory", "--bogus"], "usage: git obversa memory "),
    ):
        done = obversa(*words, cwd=repo)
        assert done.returncode == 2
        assert done.stderr.startswith(usage), done.stderr
        assert done.stderr.endswith("unrecognized arguments: --bogus\n")


def test_why_across_a_rename_names_the_line_and_the_path_in_that_commit(repo):
    rename_and_grow(repo)
    head = obversa("why", "b.py:5", cwd=repo).stdout.splitlines()[0]
    assert head.endswith("(line 5; line 2 of a.py in this commit)"), head
    heads = [line for line in obversa("why", "b.py:2-6", cwd=repo).stdout.splitlines()
             if line.startswith("commit ")]  # fmt: skip
    assert heads[0].endswith("(lines 2-3 of b.py)")
    assert heads[1].endswith("(lines 4-6; lines 1-3 of a.py in this commit)")


def test_corpus_rev_outside_a_repository_uses_the_common_wording(tmp_path):
    outside = tmp_path / "plain"
    outside.mkdir()
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path)}
    done = obversa("corpus", "search", "--rev", "HEAD", "retry", cwd=outside, env=env)
    assert done.returncode == 1
    assert done.stderr == (
        f"git obversa corpus: not a git repository: {outside} (run it inside a repository)\n"
    )


def _on_a_read_only_git_dir(repo: Path, *words: str) -> subprocess.CompletedProcess:
    """`git obversa WORDS` with REPO's .git read-only: a read-only bind mount for root
    (whom file modes do not stop), the modes for anyone else."""
    command = ["git", "obversa", *words]
    if os.geteuid() != 0:
        for path in [repo / ".git", *(repo / ".git").rglob("*")]:
            path.chmod(path.stat().st_mode & ~0o222)
        try:
            return subprocess.run(command, cwd=repo, capture_output=True, text=True)
        finally:
            for path in [repo / ".git", *(repo / ".git").rglob("*")]:
                path.chmod(path.stat().st_mode | 0o200)
    script = 'mount --bind .git .git && mount -o remount,ro,bind .git || exit 99; exec "$@"'
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("no unshare to mount .git read-only")
    done = subprocess.run(
        [unshare, "-m", "sh", "-c", script, "sh", *command], cwd=repo, capture_output=True,
        text=True,
    )  # fmt: skip
    if done.returncode == 99:
        pytest.skip("cannot mount .git read-only here")
    return done


def test_record_show_reads_a_read_only_git_dir(repo):
    assert obversa("record", "note", "Two retries: bursts of two.", cwd=repo).returncode == 0
    shown = _on_a_read_only_git_dir(repo, "record", "show")
    assert shown.returncode == 0, shown.stderr
    assert "Two retries: bursts of two." in shown.stdout
    assert shown.stdout.endswith("1 pending turn.\n")
