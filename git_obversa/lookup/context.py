"""The recorded reasons behind lines an agent is about to change, as context for it.

An agent's hook hands over what its tool is about to do (an edit's old text, a whole new
file, a patch, a range it reads). This finds the lines concerned in the file as it is
now, asks the blame lookup (`blame.lookup`, the cache first) which commits wrote them,
and renders the subject and why of each commit that records reasoning: headed by the
untrusted-data warning of `ground`, at most `LIMIT` characters, the commits that own
most of the lines first, and ending with the command that prints more.

A session is told each commit once: the commits told are kept per session id under
`<common git dir>/obversa/context/`. Lines nobody recorded a reason for, a file outside
the repository, a new file, or any lookup that fails give nothing.
"""

import os
import time

from git_obversa.lookup import BlameError
from git_obversa.repo import git, location

LIMIT = 2000  # characters of context per event, the warning and the closing line included
SESSION_DAYS = 7  # a session's record of what it was told is dropped after this
MIN_WHY = 120  # a why cut shorter than this is left out rather than shown as a stub
STATE = ("obversa", "context")

Ranges = list[tuple[int, int]]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


def _yes() -> bool:
    return True


def edited_ranges(text: str, tool_input: dict) -> Ranges:
    """The 1-based inclusive line ranges of TEXT (the file now) that TOOL_INPUT, an edit
    tool's arguments, is about to change: each old text found in the file (`old_string`,
    `edits[].old_string`; every occurrence with `replace_all`), else the lines a whole new
    `content` changes. Old text not found in the file gives no range."""
    edits = tool_input.get("edits")
    if not isinstance(edits, list):
        edits = [tool_input]
    ranges: Ranges = []
    for edit in edits:
        old = edit.get("old_string") if isinstance(edit, dict) else None
        if isinstance(old, str) and old:
            ranges += _found(text, old, every=edit.get("replace_all") is True)
    if not ranges and isinstance(tool_input.get("content"), str):
        ranges = changed_lines(text, tool_input["content"])
    return _merged(ranges)


def patch_ranges(text: str, hunks: list[list[str]]) -> Ranges:
    """The line ranges of TEXT that unified-style HUNKS (lines starting with ' ', '-' or
    '+', as an `apply_patch` update carries them) remove or replace: each hunk's old side
    is found in TEXT and its removed lines are the range."""
    ranges: Ranges = []
    for hunk in hunks:
        old_side = [line or " " for line in hunk if line[:1] in (" ", "-", "")]
        removed = [i for i, line in enumerate(old_side) if line[0] == "-"]
        if not removed:
            continue
        old = "".join(line[1:] + "\n" for line in old_side)
        for start, _ in _found(text, old, every=False):
            ranges.append((start + removed[0], start + removed[-1]))
    return _merged(ranges)


def changed_lines(old: str, new: str) -> Ranges:
    """The lines of OLD that NEW replaces or deletes (lines only added change none)."""
    import difflib

    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    return [
        (first + 1, last)
        for tag, first, last, _, _ in matcher.get_opcodes()
        if tag in ("replace", "delete")
    ]


def _found(text: str, old: str, every: bool) -> Ranges:
    ranges = []
    at = text.find(old)
    while at >= 0:
        first = text.count("\n", 0, at) + 1
        span = old[:-1] if old.endswith("\n") else old  # the end of line closes the last line
        ranges.append((first, first + span.count("\n")))
        if not every:
            break
        at = text.find(old, at + len(old))
    return ranges


def _merged(ranges: Ranges) -> Ranges:
    merged: Ranges = []
    for first, last in sorted(ranges):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(last, merged[-1][1]))
        else:
            merged.append((first, last))
    return merged


def reasons(top: str, relative: str, ranges: Ranges) -> list[dict]:
    """The commits that wrote lines RANGES of RELATIVE (in the working tree at TOP) and
    record reasoning, those owning most of the lines first (then the newest): each a
    lookup commit dict with `lines`, how many of the ranges' lines it owns. One lookup
    of the span the ranges cover: from the blame cache, or one `git blame -L`."""
    from git_obversa.lookup.blame import lookup

    if not ranges:
        return []
    try:
        found = lookup(top, relative, ranges[0][0], ranges[-1][1], rev=None)
    except (BlameError, ValueError, git.GitError):
        return []
    reasoned = []
    for commit in found.values():
        if not commit.get("reasoning"):
            continue
        owned = sum(
            max(0, min(last, end) - max(first, start) + 1)
            for first, last in commit["ranges"]
            for start, end in ranges
        )
        if owned:
            reasoned.append({**commit, "lines": owned})
    reasoned.sort(key=lambda commit: commit["date"], reverse=True)
    reasoned.sort(key=lambda commit: commit["lines"], reverse=True)
    return reasoned


def render(
    commits: list[dict], relative: str, ranges: Ranges, limit: int = LIMIT
) -> tuple[str, list[str]]:
    """(the context text for COMMITS, the commits it holds), at most LIMIT characters;
    ("", []) when not one commit fits."""
    from git_obversa.memory.warning import MEMORY_WARNING

    span = f"{ranges[0][0]}-{ranges[-1][1]}" if ranges else ""
    head = (
        f"{MEMORY_WARNING}\n\n"
        f"## Recorded reasons behind the lines of {relative} you are about to change\n"
    )
    tail = f"\nMore: `git obversa why {relative}:{span}`"
    room = limit - len(head) - len(tail)
    blocks: list[str] = []
    told: list[str] = []
    for commit in commits:
        title = f"\n### {commit['commit'][:12]} {commit['subject']}\n\n"
        why = commit["reasoning"].strip()
        left = room - len(title) - 1
        if left < min(MIN_WHY, len(why)):
            break
        if len(why) > left:
            why = why[: left - 1].rstrip() + "…"
        block = f"{title}{why}\n"
        blocks.append(block)
        told.append(commit["commit"])
        room -= len(block)
    if not blocks:
        return "", []
    return head + "".join(blocks) + tail, told


def context_for_edit(
    cwd: str, file_path: str, tool_input: dict, session: str, allowed: "Callable[[], bool]" = _yes
) -> str:
    """The context for an edit tool about to change FILE_PATH (absolute, or relative to
    CWD) with TOOL_INPUT in the session SESSION: "" when there is nothing to tell, or
    ALLOWED(), asked once the reasons are found, says not to tell."""
    target = _target(cwd, file_path)
    if target is None:
        return ""
    common_dir, top, relative, text = target
    if "patch_hunks" in tool_input:
        ranges = patch_ranges(text, tool_input["patch_hunks"])
    else:
        ranges = edited_ranges(text, tool_input)
    found = reasons(top, relative, ranges)
    return _told_once(common_dir, session, found, relative, ranges) if found and allowed() else ""


def context_for_read(
    cwd: str,
    file_path: str,
    first: int,
    last: int,
    session: str,
    allowed: "Callable[[], bool]" = _yes,
) -> str:
    """The context for lines FIRST..LAST of FILE_PATH an agent reads: as for an edit."""
    target = _target(cwd, file_path)
    if target is None or first < 1 or last < first:
        return ""
    common_dir, top, relative, text = target
    last = min(last, text.count("\n") + (not text.endswith("\n")))
    if last < first:
        return ""
    ranges = [(first, last)]
    found = reasons(top, relative, ranges)
    return _told_once(common_dir, session, found, relative, ranges) if found and allowed() else ""


def _target(cwd: str, file_path: str) -> tuple[str, str, str, str] | None:
    """(common git dir, top of the working tree, FILE_PATH from there, the file's text)
    for a regular file of the working tree CWD is in; None otherwise (outside it, new,
    not text)."""
    found = location.located(cwd)
    if found is None:
        return None
    common_dir, _, top, _ = found
    path = os.path.realpath(os.path.join(cwd, os.path.expanduser(file_path)))
    relative = os.path.relpath(path, os.path.realpath(top))
    if relative.startswith(os.pardir) or os.path.islink(path) or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8", newline="") as file:
            text = file.read()
    except (OSError, UnicodeDecodeError):
        return None
    return common_dir, top, relative.replace(os.sep, "/"), text.replace("\r\n", "\n")


def _told_once(
    common_dir: str, session: str, commits: list[dict], relative: str, ranges: Ranges
) -> str:
    """Render COMMITS the session SESSION was not told yet, and remember them as told."""
    if not commits:
        return ""
    record = session_file(common_dir, session)
    told = _read_told(record)
    text, shown = render([c for c in commits if c["commit"] not in told], relative, ranges)
    if shown:
        _add_told(record, shown)
    return text


def session_file(common_dir: str, session: str, kind: str = "told") -> str:
    """Where what is kept for the session SESSION (of KIND) lives under COMMON_DIR."""
    from git_obversa.lean.builtin import builtin_sha256

    sha256 = builtin_sha256()
    key = sha256(session.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return os.path.join(common_dir, *STATE, f"{key}.{kind}")


def _read_told(record: str) -> set[str]:
    try:
        with open(record, encoding="ascii") as file:
            return {line.strip() for line in file if len(line.strip()) in (40, 64)}
    except (OSError, UnicodeDecodeError):
        return set()


def _add_told(record: str, shas: list[str]) -> None:
    """Append SHAS to the session's record (one short append: concurrent hooks of one
    session interleave whole lines), dropping records of sessions long over."""
    folder = os.path.dirname(record)
    fresh = not os.path.isdir(folder)
    os.makedirs(folder, exist_ok=True)
    with open(record, "a", encoding="ascii") as file:
        file.write("".join(f"{sha}\n" for sha in shas))
    if not fresh and os.path.getsize(record) == 41 * len(shas):  # a new session: tidy up
        _drop_old(folder)


def _drop_old(folder: str) -> None:
    cutoff = time.time() - SESSION_DAYS * 86400
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        try:
            if os.path.getmtime(path) < cutoff:
                os.unlink(path)
        except OSError:
            pass
