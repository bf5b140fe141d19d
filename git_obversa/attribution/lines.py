"""The lines a commit added, as line numbers of each file in that commit."""

from __future__ import annotations

import os
import re

from git_obversa.repo import git

HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")
ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def added_lines(commit: str, cwd: str | os.PathLike[str] | None = None) -> dict[str, list[int]]:
    """{path: the 1-based numbers of the lines COMMIT added to it, ascending}, against its
    first parent (the empty tree for a root commit). Binary files add no lines."""
    patch = git.output(
        ["-c", "core.quotePath=false", "diff-tree", "-p", "-U0", "--no-color", "--no-ext-diff"]
        + ["--root", "-r", "-m", "--first-parent", commit, "--"],
        cwd,
    )
    added: dict[str, list[int]] = {}
    path = None
    for line in patch.split("\n"):
        if line.startswith("+++ "):
            name = line[4:]
            path = None if name == "/dev/null" else _unquote(name)[2:]
        elif line.startswith("@@") and path is not None:
            match = HUNK.match(line)
            if match:
                start, count = int(match[1]), int(match[2] if match[2] is not None else 1)
                added.setdefault(path, []).extend(range(start, start + count))
    return {name: numbers for name, numbers in added.items() if numbers}


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
