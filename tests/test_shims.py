"""The hook shims as files: the templates in git_obversa/hooks/shims/ ship with the
package, `install` fills their marked region and nothing else, and the shell copy of
git's trailer rule agrees with its Python home (and with git) on the same paragraphs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from git_obversa.hooks.install import (
    COMMIT_HOOKS,
    SHIM_DIRECTORY,
    SYNC_HOOKS,
    TEMPLATE_END,
    TEMPLATE_START,
    fill_template,
    shim_text,
)
from git_obversa.record.message import is_trailer_paragraph

ROOT = Path(__file__).resolve().parent.parent
SHELLS = ["/bin/sh"] + [shell for shell in ("/usr/bin/dash", "/bin/bash") if Path(shell).exists()]


def test_every_shim_template_ships_as_package_data():
    line = '"git_obversa.hooks" = ["shims/*.sh"]'
    assert line in (ROOT / "pyproject.toml").read_text().splitlines()
    templates = {path.name for path in SHIM_DIRECTORY.iterdir()}
    assert templates == {"commit-hook.sh", "pre-push.sh"}  # all that the pattern ships


@pytest.mark.parametrize("name", COMMIT_HOOKS + SYNC_HOOKS)
def test_install_fills_only_the_marked_region(name):
    text = shim_text(name)
    head, rest = text.split(TEMPLATE_START)
    region, tail = rest.split(TEMPLATE_END)
    template = next(
        path.read_text() for path in SHIM_DIRECTORY.glob("*.sh") if path.read_text().endswith(tail)
    )
    assert template.startswith(head) and text.startswith("#!/bin/sh\n# git-obversa hook shim")
    assert all(line.partition("=")[2] for line in region.splitlines())  # every name has a value
    for shell in SHELLS:
        checked = subprocess.run([shell, "-n"], input=text, capture_output=True, text=True)
        assert checked.returncode == 0, (shell, checked.stderr)


def test_a_region_that_names_other_values_is_refused():
    template = f"#!/bin/sh\n{TEMPLATE_START}hook=\nstale=\n{TEMPLATE_END}echo\n"
    with pytest.raises(ValueError, match="stale"):
        fill_template(template, {"hook": "commit-msg"})
    filled = fill_template(template, {"hook": "a b", "stale": "it's"})
    assert "hook='a b'\nstale='it'\"'\"'s'\n" in filled


# Paragraphs at the end of a message: trailers, folded lines, git's own lines and text.
PARAGRAPHS = [
    ["Signed-off-by: A <a@example.com>"],
    ["Co-authored-by: B <b@example.com>", "Reviewed-by: C"],
    ["Just a sentence."],
    ["Key: value", "  folded onto the line above", "\tand a tab"],
    ["  a folded line with nothing above", "Key: value"],
    ["Some text", "Signed-off-by: A <a@example.com>"],
    ["one", "two", "three", "Signed-off-by: A <a@example.com>"],
    ["one", "two", "three", "four", "Signed-off-by: A <a@example.com>"],
    ["one", "  folded", "(cherry picked from commit 0123abc)"],
    ["Key : blanks before the colon"],
    ["Two words: not a token"],
    [": no token at all"],
    ["Key:"],
    ["URL: https://example.com:8080/path"],
    ["Clé: not ASCII"],
    ["Signed-off-by:A without the blank"],
    ["Key: value", "text", "Other-Key: value"],
    ["Signed-off-by: A", "  folded", "text", "more text"],
]

DRIVER = """\
number=0
while IFS= read -r given; do number=$((number + 1)); eval "line$number=\\$given"; done
if is_trailer_paragraph 1 "$number"; then echo trailers; else echo text; fi
"""


def shell_rule() -> str:
    """The shell function as the commit-hook template has it."""
    text = (SHIM_DIRECTORY / "commit-hook.sh").read_text()
    start = text.index("\nis_trailer_paragraph() {") + 1
    return text[start : text.index("\n}\n", start) + 3]


@pytest.mark.parametrize("shell", SHELLS)
def test_the_shell_trailer_rule_is_the_python_one_and_gits(shell):
    function = shell_rule()
    for paragraph in PARAGRAPHS:
        text = "\n".join(paragraph) + "\n"
        in_shell = subprocess.run(
            [shell, "-c", function + DRIVER], input=text, capture_output=True, text=True
        )
        assert in_shell.returncode == 0, in_shell.stderr
        in_python = is_trailer_paragraph(paragraph)
        # Git adds a trailer to a trailer paragraph, else below it after a blank line.
        added = subprocess.run(
            ["git", "interpret-trailers", "--trailer", "Zz: 1"],
            input="Subject\n\n" + text,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert in_shell.stdout.strip() == ("trailers" if in_python else "text"), paragraph
        assert (not added.endswith("\n\nZz: 1\n")) == in_python, paragraph
