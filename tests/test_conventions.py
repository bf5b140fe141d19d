"""Git's conventions, end to end: the pager, colour, help and the man page, JSON errors,
one wording for "not a git repository", exit status 2 for every usage error.

A terminal is a real pseudo-terminal (the pty module); a pager is a real program (a
GIT_PAGER that records what it was given).
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from git_obversa.cli import COMMANDS
from git_obversa.cli.parser import build_parser
from tests.gitutil import git, obversa
from tests.test_lookup_why import commit, reason

ESCAPE = "\033["
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def history(repo: Path) -> Path:
    commit(repo, reason("Add config", "Defaults must work offline."), **{"c.txt": "a\nb\nc\n"})
    return repo


def on_terminal(*args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run `git obversa ARGS` with stdout and stderr on a pseudo-terminal; (status, what
    the terminal showed)."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        ["git", "obversa", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=terminal,
        stderr=terminal,
        env={**os.environ, "TERM": "xterm", **(env or {})},
    )
    os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # EIO: every writer of the terminal has gone
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    return process.wait(timeout=60), shown.decode().replace("\r\n", "\n")


def recording_pager(tmp_path: Path) -> tuple[str, Path]:
    """A pager command that keeps what it is given in a file (and shows nothing)."""
    recorded = tmp_path / "paged.txt"
    return f"cat > '{recorded}'", recorded


# --- the pager ------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["log"], ["why", "c.txt"], ["blame", "c.txt"]])
def test_long_output_goes_through_git_pager_on_a_terminal(history, tmp_path, command):
    pager, recorded = recording_pager(tmp_path)
    status, shown = on_terminal(*command, cwd=history, env={"GIT_PAGER": pager})
    assert status == 0
    assert "Defaults must work offline" in recorded.read_text()
    assert "Defaults" not in shown  # it all went to the pager


def test_pager_choice_follows_git(history, tmp_path):
    pager, recorded = recording_pager(tmp_path)
    # core.pager when GIT_PAGER is not set; then PAGER.
    git(history, "config", "core.pager", pager)
    on_terminal("log", cwd=history, env={"PAGER": "false"})
    assert "Add config" in recorded.read_text()
    recorded.unlink()
    git(history, "config", "--unset", "core.pager")
    on_terminal("log", cwd=history, env={"PAGER": pager})
    assert "Add config" in recorded.read_text()
    recorded.unlink()
    # GIT_PAGER wins over core.pager; an empty pager or `cat` means none.
    git(history, "config", "core.pager", "false")
    for none in ("", "cat"):
        status, shown = on_terminal("log", cwd=history, env={"GIT_PAGER": none})
        assert status == 0 and "Add config" in shown and not recorded.exists()


def test_pager_can_be_turned_off(history, tmp_path):
    pager, recorded = recording_pager(tmp_path)
    env = {"GIT_PAGER": pager}
    status, shown = on_terminal("--no-pager", "log", cwd=history, env=env)
    assert status == 0 and "Add config" in shown and not recorded.exists()
    git(history, "config", "pager.obversa.log", "false")  # this command only
    assert "Add config" in on_terminal("log", cwd=history, env=env)[1]
    assert not recorded.exists()
    on_terminal("why", "c.txt", cwd=history, env=env)
    assert recorded.exists()
    recorded.unlink()
    git(history, "config", "--unset", "pager.obversa.log")
    git(history, "config", "pager.obversa", "false")  # every command
    assert "Add config" in on_terminal("log", cwd=history, env=env)[1]
    assert not recorded.exists()
    # `git --no-pager obversa ...` tells us nothing but its own command line.
    git(history, "config", "--unset", "pager.obversa")
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        ["git", "--no-pager", "obversa", "log"], cwd=history, stdout=terminal, env=os.environ | env
    )
    os.close(terminal)
    assert process.wait(timeout=60) == 0
    os.close(controller)
    assert not recorded.exists()


def test_a_named_pager_for_one_command(history, tmp_path):
    pager, recorded = recording_pager(tmp_path)
    git(history, "config", "pager.obversa.why", pager)  # not a boolean: the pager itself
    on_terminal("why", "c.txt", cwd=history, env={"GIT_PAGER": "false"})
    assert "Add config" in recorded.read_text()


def test_never_paged_when_stdout_is_not_a_terminal(history, tmp_path):
    pager, recorded = recording_pager(tmp_path)
    completed = obversa("log", cwd=history, env=os.environ | {"GIT_PAGER": pager})
    assert "Add config" in completed.stdout
    assert not recorded.exists()


# --- colour ---------------------------------------------------------------------------


def test_colour_on_a_terminal_and_never_in_a_pipe(history):
    env = {"GIT_PAGER": "cat"}
    status, shown = on_terminal("log", cwd=history, env=env)
    assert status == 0 and f"{ESCAPE}33mcommit " in shown
    piped = obversa("log", cwd=history, env=os.environ | {"TERM": "xterm"})
    assert piped.returncode == 0 and ESCAPE not in piped.stdout
    # --color=always colours a pipe; never and color.ui=never keep a terminal plain.
    assert f"{ESCAPE}33m" in obversa("blame", "c.txt", "--color=always", cwd=history).stdout
    assert ESCAPE not in on_terminal("log", "--color=never", cwd=history, env=env)[1]
    assert ESCAPE not in on_terminal("log", "--no-color", cwd=history, env=env)[1]
    git(history, "config", "color.ui", "never")
    assert ESCAPE not in on_terminal("why", "c.txt", cwd=history, env=env)[1]
    assert ESCAPE in on_terminal("why", "c.txt", "--color", cwd=history, env=env)[1]
    git(history, "config", "color.obversa", "auto")  # ours wins over color.ui
    assert ESCAPE in on_terminal("why", "c.txt", cwd=history, env=env)[1]
    # A pipe gets colour only from --color=always on the command line: the configuration
    # is not even read (no git process) for a pipe.
    git(history, "config", "color.obversa", "always")
    assert ESCAPE not in obversa("log", cwd=history).stdout


def test_colour_through_the_pager_unless_color_pager_is_false(history, tmp_path):
    pager, recorded = recording_pager(tmp_path)
    on_terminal("log", cwd=history, env={"GIT_PAGER": pager})
    assert ESCAPE in recorded.read_text()
    git(history, "config", "color.pager", "false")
    on_terminal("log", cwd=history, env={"GIT_PAGER": pager})
    assert ESCAPE not in recorded.read_text()


def test_json_is_never_paged_or_coloured(history, tmp_path):
    pager, recorded = recording_pager(tmp_path)
    status, shown = on_terminal("log", "--json", cwd=history, env={"GIT_PAGER": pager})
    assert status == 0 and not recorded.exists() and ESCAPE not in shown
    assert json.loads(shown)["commits"][0]["subject"] == "Add config"


# --- errors ---------------------------------------------------------------------------


REPOSITORY_COMMANDS = [
    ["why", "a.txt"],
    ["blame", "a.txt"],
    ["log"],
    ["memory", "view"],
    ["memory", "scopes"],
    ["memory", "sync"],
    ["record", "show"],
    ["record", "note", "x"],
    ["install"],
    ["uninstall"],
]


@pytest.mark.parametrize("command", REPOSITORY_COMMANDS, ids=" ".join)
def test_not_a_git_repository_in_one_wording(tmp_path, command):
    outside = tmp_path / "plain"
    outside.mkdir()
    completed = obversa(*command, cwd=outside)
    assert completed.returncode == 1
    assert completed.stderr == (
        f"git obversa {command[0]}: not a git repository: {outside} (run it inside a repository)\n"
    )
    as_json = obversa(*command, "--json", cwd=outside)
    if as_json.returncode == 2:
        return  # this verb has no --json: a usage error, tested below
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["error"] == {
        "code": "NOT_A_REPOSITORY",
        "message": f"not a git repository: {outside} (run it inside a repository)",
    }


@pytest.mark.parametrize(
    "command",
    [["why", "missing.txt"], ["blame", "missing.txt"], ["log", "--rev", "nope"]],
    ids=" ".join,
)
def test_json_errors_are_json_on_stdout_with_the_same_status(history, command):
    plain = obversa(*command, cwd=history)
    as_json = obversa(*command, "--json", cwd=history)
    assert plain.returncode == as_json.returncode == 1
    error = json.loads(as_json.stdout)
    assert error["ok"] is False and error["error"]["code"] == "FAILED"
    assert plain.stderr == f"git obversa {command[0]}: {error['error']['message']}\n"


@pytest.mark.parametrize(
    "command",
    [
        ["log", "-n", "-1"],
        ["log", "--max-count", "x"],
        ["why"],
        ["why", "c.txt:0"],
        ["blame", "c.txt", "-CCCC"],
        ["memory", "view", "--range", "1"],
        ["memory", "view", "--range", "1", "-2"],
        ["memory", "view", "--range", "3", "2"],
        ["corpus", "view", "c.txt", "--range", "-1", "2"],
        ["memory", "insert", "/memories/a.md", "-1", "text"],
        ["memory", "log", "-n", "0"],
        ["log", "-n", "0"],
        ["corpus", "search", "x", "--limit", "0"],
        ["corpus", "view", "c.txt", "--range", "0", "2"],
        ["ground", "--source", "/memories/a.md", "--max-files", "0"],
        ["web", "--port", "70000"],
        ["memory", "bogus"],
        ["corpus"],
        ["nosuchcommand"],
        ["help", "nosuchcommand"],
    ],
    ids=" ".join,
)
def test_every_usage_error_exits_2(history, command):
    completed = obversa(*command, cwd=history)
    assert completed.returncode == 2, completed.stderr
    assert completed.stdout == ""
    assert completed.stderr.strip(), "a usage error says what was wrong"
    if command[0] in ("log", "why", "blame", "corpus", "memory", "ground"):
        as_json = obversa(*command, "--json", cwd=history)
        assert as_json.returncode == 2
        assert json.loads(as_json.stdout)["error"]["code"] == "USAGE"


def test_a_number_an_option_can_never_take_is_named_in_one_line(history):
    # The command line judges what no data could make valid; the engine, what depends
    # on the data (a line past the end of a file is exit 1, not a usage error).
    completed = obversa("corpus", "search", "x", "--limit", "0", cwd=history)
    assert completed.returncode == 2
    assert completed.stderr.splitlines()[-1] == (
        "git obversa corpus search: argument --limit: '0' is not a whole number of 1 or more"
    )
    assert obversa("memory", "create", "/memories/a.md", "one line", cwd=history).returncode == 0
    past_the_end = obversa("memory", "view", "/memories/a.md", "--range", "5", "-1", cwd=history)
    assert past_the_end.returncode == 1, past_the_end.stderr
    assert "INVALID_RANGE" in past_the_end.stderr


def test_record_ingest_of_a_file_that_is_not_a_transcript(repo, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("just some notes\nnot JSON at all\n")
    completed = obversa("record", "ingest", "--claude-code", str(notes), cwd=repo)
    assert completed.returncode == 1
    assert completed.stderr.startswith("git obversa record: ")
    assert str(notes) in completed.stderr and "not a Claude Code transcript" in completed.stderr
    records = tmp_path / "records.jsonl"  # JSON lines, but no transcript entry among them
    records.write_text('{"id": 1}\n[1, 2]\n')
    completed = obversa("record", "ingest", "--claude-code", str(records), cwd=repo)
    assert completed.returncode == 1 and "not a Claude Code transcript" in completed.stderr


def test_corpus_names_the_directory_that_is_not_one(repo):
    completed = obversa("corpus", "search", "x", "--dir", "README.md", cwd=repo)
    assert completed.returncode == 1
    assert "README.md is not a directory" in completed.stderr


# --- help -----------------------------------------------------------------------------


def every_parser():
    """(words, parser) for every command and verb of `git obversa`."""
    for name in COMMANDS:
        parser = build_parser(name)
        stack = [([], parser)]
        while stack:
            words, current = stack.pop()
            if words:
                yield words, current
            for action in current._actions:
                if isinstance(action, argparse._SubParsersAction):
                    for verb, child in action.choices.items():
                        stack.append(([*words, verb], child))


def test_every_subcommand_help_shows_its_own_usage(repo):
    checked = 0
    for words, parser in every_parser():
        assert parser.prog == "git obversa " + " ".join(words)
        assert parser.format_usage().startswith(f"usage: git obversa {' '.join(words)}")
        checked += 1
    assert checked > len(COMMANDS)  # the verbs of memory, record, corpus, hook too
    shown = obversa("memory", "view", "--help", cwd=repo)
    assert shown.returncode == 0 and shown.stdout.startswith("usage: git obversa memory view")


def test_help_command_is_the_command_help(repo):
    for words in (["log"], ["memory", "view"], ["corpus", "search"]):
        asked = obversa("help", *words, cwd=repo)
        assert asked.returncode == 0
        assert asked.stdout == obversa(*words, "--help", cwd=repo).stdout
    overview = obversa("help", cwd=repo)
    assert overview.returncode == 0 and "consolidate" in overview.stdout


def test_the_man_page_names_every_command():
    page = (ROOT / "man" / "git-obversa.1").read_text()
    from git_obversa import __version__

    assert f'"git-obversa {__version__}"' in page.splitlines()[0]
    # The words of each item heading (the line after .TP) in the COMMANDS section.
    section = page.split("\n.SH COMMANDS\n")[1].split("\n.SH ")[0]
    headings = re.findall(r"^\.TP\n(.*)$", section, flags=re.MULTILINE)
    described = set()
    for heading in headings:
        plain = re.sub(r"\\f[BIRP]|^\.B[IR]? |\"", " ", heading.replace("\\-", "-"))
        described.update(plain.split())
    missing = [name for name in COMMANDS if name not in described]
    assert not missing, f"man/git-obversa.1 does not describe {missing} under COMMANDS"


def test_git_help_obversa_finds_the_page_of_an_installed_wheel(tmp_path):
    """`git help obversa` and `git obversa --help` are git's: they run `man git-obversa`.
    A wheel installs the page into PREFIX/share/man/man1, beside PREFIX/bin, where man
    looks for the pages of each PATH directory."""
    if shutil.which("man") is None:
        pytest.skip("no man program on this machine")  # git's help needs one too
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        + ["-w", wheels, ROOT],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    # A fresh environment of its own (pip --prefix would uninstall this checkout's
    # editable install first), without pip: the suite's pip installs into it.
    prefix = tmp_path / "prefix"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", prefix], check=True)
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", prefix / "bin" / "python", "install", "-q"]
        + ["--no-deps", *wheels.glob("*.whl")],
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stderr
    assert (prefix / "share" / "man" / "man1" / "git-obversa.1").is_file()
    # The program is bin/git-obversa with this environment's interpreter, not a script
    # generated by pip (which imports `re` first: docs/benchmarks.md).
    program = (prefix / "bin" / "git-obversa").read_text()
    assert program.startswith(f"#!{prefix / 'bin'}/python") and "import re" not in program
    env = os.environ | {
        "PATH": f"{prefix / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "MANPAGER": "cat",
        "MANWIDTH": "80",
    }
    env.pop("MANPATH", None)
    version = subprocess.run(["git", "obversa", "--version"], env=env, capture_output=True)
    assert version.stdout.decode().startswith("git-obversa ")
    for command in (["git", "help", "obversa"], ["git", "obversa", "--help"]):
        shown = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert shown.returncode == 0, shown.stderr
        assert "git-obversa - keep why a change was made next to the change" in shown.stdout
