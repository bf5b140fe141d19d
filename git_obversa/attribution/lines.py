"""The lines a commit added, as line numbers of each file in that commit."""

from __future__ import annotations

import os
import re

from git_obversa.repo import git

HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")
# What `diff-tree --stdin` prints above each commit's patch (`-m`: and its parent).
COMMIT_LINE = re.compile(r"^[0-9a-f]{40,64}(?: \(from [0-9a-f]{40,64}\))?$")
FULL_HASH = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")
ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def added_lines(commit: str, cwd: str | os.PathLike[str] | None = None) -> dict[str, list[int]]:
    """{path: the 1-based numbers of the lines COMMIT added to it, ascending}, against its
    first parent (the empty tree for a root commit). Binary files add no lines."""
    if not FULL_HASH.match(commit):
        commit = git.output(
            ["rev-parse", "--verify", "--end-of-options", f"{commit}^{{commit}}"], cwd
        )
    files = added_text([commit], cwd).get(commit, {})
    return {path: [number for number, _ in lines] for path, lines in files.items()}


def added_text(
    commits: list[str], cwd: str | os.PathLike[str] | None = None
) -> dict[str, dict[str, list[tuple[int, str]]]]:
    """{commit: {path: [(line number, text), ...]}}: the lines each of COMMITS (full
    hashes) added, as `added_lines` counts them, with their text; one `git diff-tree`."""
    patch = git.run(
        ["-c", "core.quotePath=false", "diff-tree", "--stdin", "-p", "-U0", "--no-color"]
        + ["--no-ext-diff", "--root", "-r", "-m", "--first-parent", "--"],
        cwd,
        input="".join(f"{commit}\n" for commit in commits).encode(),
    ).stdout.decode("utf-8", "surrogateescape")
    found: dict[str, dict[str, list[tuple[int, str]]]] = {}
    added: dict[str, list[tuple[int, str]]] = {}
    path = None
    number = 0  # the next added line's number; 0 in a file's header
    for line in patch.split("\n"):
        if COMMIT_LINE.match(line):  # patch lines start with " ", "+", "-" or "\\"
            added = found.setdefault(line.split(" ", 1)[0], {})
            path, number = None, 0
        elif line.startswith("diff "):
            path, number = None, 0
        elif number == 0 and line.startswith("+++ "):
            name = line[4:]
            path = None if name == "/dev/null" else _unquote(name)[2:]
        elif line.startswith("@@"):
            match = HUNK.match(line)
            number = int(match[1]) if match else 0
        elif line.startswith("+") and path is not None and number:
            added.setdefault(path, []).append((number, line[1:]))
            number += 1
    return found


def to_ranges(numbers: list[int]) -> list[tuple[int, int]]:
    """Ascending line NUMBERS as inclusive (start, end) runs."""
    runs: list[tuple[int, int]] = []
    for number in sorted(set(numbers)):
        if runs and runs[-1][1] == number - 1:
            runs[-1] = (runs[-1][0], number)
        else:
            runs.append((number, number))
    return runs


def _unquote(name: str) -> str:
    """A path as git prints it in a patch header: C-quoted when it holds odd bytes, else
    followed by a tab when it holds a space (as GNU diff marks the name's end)."""
    if not (name.startswith('"') and name.endswith('"')):
        return name[:-1] if name.endswith("\t") and " " in name else name
    raw = bytearray()
    body, index = name[1:-1], 0
    while index < len(body):
        char = body[index]
        if char == "\\" and index + 1 < len(body):
            following = body[index + 1]
            if following in ESCAPES:
                raw.append(ESCAPES[following])
                index += 2
                continue
            if body[index + 1 : index + 4].isdigit():
                raw.append(int(body[index + 1 : index + 4], 8))
                index += 4
                continue
        raw.extend(char.encode("utf-8"))
        index += 1
    return raw.decode("utf-8", "surrogateescape")
