"""Shared fixtures: real Git repositories in temporary directories, never a mocked Git.

Every test runs with its own HOME and global Git config, so the machine's configuration
cannot leak in, and with the interpreter's bin directory first on PATH, so `git obversa`
(the console script) and hook shims find this checkout's installation.
"""

from __future__ import annotations

import compileall
import os
import sys
from pathlib import Path

import pytest

from tests.gitutil import make_repo


def pytest_configure(config: pytest.Config) -> None:
    # The suite starts the console script hundreds of times. An installed wheel has its
    # bytecode compiled by pip; an editable checkout does not, and where
    # PYTHONDONTWRITEBYTECODE is set (as on CI) every one of those processes would compile
    # the package from source again. Compile it once, as an install would.
    compileall.compile_dir(Path(__file__).resolve().parent.parent / "git_obversa", quiet=2)


@pytest.fixture(autouse=True)
def git_environment(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("home")
    config = home / ".gitconfig"
    config.write_text(
        "[user]\n\tname = Test Author\n\temail = author@example.com\n"
        "[init]\n\tdefaultBranch = main\n"
        "[advice]\n\tdetachedHead = false\n"
    )
    monkeypatch.setenv("HOME", str(home))
    # The secret engine's rules, indexed once per installed engine (record/engine_rules.py),
    # are shared by the whole run, as by every repository of a user.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in list(os.environ):
        if name.startswith("GIT_") and name not in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM"):
            monkeypatch.delenv(name)
        if name.startswith("PRE_COMMIT"):
            monkeypatch.delenv(name)
    bindir = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", bindir + os.pathsep + os.environ.get("PATH", ""))
    return home


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A non-bare repository on branch main with one commit."""
    return make_repo(tmp_path / "repo")
