"""The commit-message format that carries reasoning (DESIGN.md, "Commit-message format").

    <subject>

    <the user's body, if any>

    Why:
    <reasoning, wrapped at 72 columns, no line starting with the comment character>

    <trailers the user or git added>
    Obversa-Record: <stage>

The block sits above the final trailer paragraph, whose `Obversa-Record` trailer marks it.
Commits written from a record's `message()` with `git commit -F` (the original
implementation, a harness committing by itself) carry a `## Why` section instead;
`parse_reasoning` at the end of this module reads both.

Everything here is pure text work on the message file as `prepare-commit-msg` sees it:
the user's part first, then (in editor mode) git's comment lines and, with `-v`, the
scissors line and the diff. Only the user's part is touched. The one question that needs
git — is this paragraph a trailer block? — is answered by the caller: the hook asks
`git interpret-trailers`, which knows the repository's trailer configuration, because a
wrong answer would leave trailers above the block. `parse_reasoning` (at the end) reads
many messages per call and must not start git for each, so it applies git's default rule
in-process; a miss there only moves where a read block ends.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

WHY_HEADING = "Why:"
LEGACY_WHY_HEADING = "## Why"
RECORD_TRAILER = "Obversa-Record"
# Names the commit's kept record (record/kept.py).
ID_TRAILER = "Obversa-Record-Id"
WRAP_COLUMNS = 72
MAX_COLUMNS = 100  # commitlint's body-max-line-length: not even an unbreakable word goes past

# The characters `core.commentChar=auto` chooses from, in git's order.
AUTO_COMMENT_CHARS = "#;@!$%^&|:"
_SCISSORS = " ------------------------ >8 ------------------------"
# A list item's marker (or an indentation): a wrapped item's lines hang under its text.
_LIST_ITEM = r"\s*(?:[-*+]|\d+[.)])\s+|\s+"


def comment_chars(setting: str | None) -> str:
    """The characters a line may not start with under this `core.commentChar` setting.

    With `auto` git picks the character only once the message exists, so no line of ours
    may start with any character it could pick.
    """
    if not setting:
        return "#"
    if setting == "auto":
        return AUTO_COMMENT_CHARS
    return setting[0]


def comment_char(text: str, chars: str, *, editor: bool = True) -> str:
    """The comment character of the message file TEXT: under `auto` (several CHARS), the
    one git picked — the first that starts no line of the message git had before its
    hooks (git counts a character after `\r` as a line's start too).

    When git opens the editor it appends its comment block to that message (a blank
    line, then lines that start with the character it picked), which is left out. Without
    the EDITOR there is none, so trailing lines that start with a character are the
    message's own and rule that character out (`git commit -m "#12 fix"`), unless they
    carry git's mark: its scissors line, or its hint, which names the character (an
    editor set to `:` is told apart from no editor only so)."""
    for char in chars[:-1]:
        lines, tail = split_message(text, char)
        if not editor and tail and not _is_git_comment_block(tail, char):
            lines = text.replace("\r", "\n").split("\n")
        if not any(line.startswith(char) for line in lines):
            return char
    return chars[-1]


def _is_git_comment_block(tail: str, char: str) -> bool:
    """Whether TAIL (`split_message`'s) holds git's scissors line or a comment line that
    names CHAR after its start, as every translation of git's hint does."""
    return any(
        line == char + _SCISSORS or (line.startswith(char) and char in line[1:])
        for line in tail.splitlines()
    )


def split_message(text: str, char: str) -> tuple[list[str], str]:
    """(the user's lines, the tail): the tail is the scissors line and everything after
    it, and the comment and blank lines (comment character CHAR) that end the message."""
    lines = text.splitlines()
    end = len(lines)
    for number, line in enumerate(lines):
        if line == char + _SCISSORS:
            end = number
            break
    while end > 0 and (not lines[end - 1].strip() or lines[end - 1].startswith(char)):
        end -= 1
    tail = lines[end:]
    while tail and not tail[0].strip():
        tail.pop(0)
    return lines[:end], "".join(line + "\n" for line in tail)


def subject_line(lines: list[str], char: str) -> str | None:
    """The first line of LINES that is neither blank nor a comment, stripped."""
    return next(
        (line.strip() for line in lines if line.strip() and not line.startswith(char)), None
    )


def last_paragraph(lines: list[str], char: str) -> int | None:
    """Where the last paragraph of LINES starts, or None when it is the title paragraph
    (git never reads trailers there). LINES end with a non-blank line."""
    start = len(lines)
    while start > 0 and lines[start - 1].strip():
        start -= 1
    first = next((n for n, line in enumerate(lines) if not line.startswith(char)), None)
    if start == len(lines) or (first == start and lines[first].strip()):
        return None
    return start


def format_block(reasoning: str, chars: str) -> list[str]:
    """REASONING as the lines under `Why:`: a leading heading dropped, long lines wrapped
    at 72 columns, blank-line runs folded, no line starting with one of CHARS."""
    raw = reasoning.strip("\n").splitlines()
    if raw and raw[0].strip() in (WHY_HEADING, LEGACY_WHY_HEADING):
        raw = raw[1:]
    lines: list[str] = []
    for line in raw:
        line = line.rstrip()
        if not line:
            if lines and lines[-1]:
                lines.append("")
            continue
        lines.extend(_wrap(line))
    while lines and not lines[-1]:
        lines.pop()
    # A leading space keeps git's cleanup from taking the line for a comment.
    return [" " + line if line and line[0] in chars else line for line in lines]


def insert_reasoning(
    text: str,
    *,
    reasoning: str,
    stages: list[str],
    chars: str,
    is_trailer_block: Callable[[list[str]], bool],
    editor: bool = True,
    record_id: str | None = None,
) -> str:
    """TEXT (a message file with a subject) with REASONING in its `Why:` block, one
    `Obversa-Record` trailer per stage and, with RECORD_ID, an `Obversa-Record-Id`
    trailer naming the kept record (record/kept.py). The block goes below the user's own
    text, so it is never the subject. EDITOR: git opened the editor (see `comment_char`).

    A block already there (amend, `-c`, a retried commit, one written by hand) is kept and
    extended, never repeated: reasoning it already holds is not added again.
    """
    char = comment_char(text, chars, editor=editor)
    lines, tail = split_message(text, char)
    start = last_paragraph(lines, char)
    trailers: list[str] = []
    if start is not None and is_trailer_block(lines[start:]):
        lines, trailers = lines[:start], lines[start:]
    recorded = [line for line in trailers if _record_stage(line) is not None]
    ids = [line for line in trailers if _is_id_line(line)]
    trailers = [line for line in trailers if _record_stage(line) is None and line not in ids]
    old_block: list[str] = []
    # The last `Why:` line below the subject paragraph heads the block, whether the hook
    # or a person wrote it.
    heading = _last_index(lines, WHY_HEADING)
    if heading is not None and heading > _subject_end(lines, char):
        lines, old_block = lines[:heading], lines[heading + 1 :]
    block = format_block("\n".join(old_block), chars)
    new = format_block(reasoning, chars)
    if new and not _contains(block, new):
        block += [""] + new if block else new
    record_lines = []
    for stage in [_record_stage(line) for line in recorded] + stages:
        line = f"{RECORD_TRAILER}: {stage}"
        if line not in record_lines:
            record_lines.append(line)
    if record_id is not None and f"{ID_TRAILER}: {record_id}" not in ids:
        ids.append(f"{ID_TRAILER}: {record_id}")
    record_lines += ids

    while lines and not lines[-1].strip():
        lines.pop()
    out = lines + ["", WHY_HEADING] + block + [""] + trailers + record_lines
    return "".join(line + "\n" for line in out) + ("\n" + tail if tail else "")


def _subject_end(lines: list[str], char: str) -> int:
    """The index of the line that ends the subject paragraph of LINES."""
    start = next(
        (n for n, line in enumerate(lines) if line.strip() and not line.startswith(char)), 0
    )
    end = start
    while end + 1 < len(lines) and lines[end + 1].strip():
        end += 1
    return end


SHOWN_FIRST_LINE = "git-obversa adds this reasoning to the message when you save it"


def comment_lines(char: str, subject: str, reasoning: str) -> list[str]:
    """The reasoning as comment lines (comment character CHAR) for the editor: shown, not
    yet part of the message, so quitting without typing still aborts the commit."""
    lines = [
        f"{char} {SHOWN_FIRST_LINE}",
        f"{char} (delete this line to leave it out). Suggested subject:",
        f"{char}   {subject}",
        char,
        f"{char} {WHY_HEADING}",
    ]
    return lines + [f"{char} {line}".rstrip() for line in reasoning.splitlines()]


def remove_lines(text: str, shown: list[str]) -> str:
    """TEXT without the comment lines SHOWN (from `comment_lines`) and the blank line
    written before them."""
    if not shown:
        return text
    lines = text.splitlines()
    for start in range(len(lines)):
        if lines[start : start + len(shown)] == shown:
            end = start + len(shown)
            if start > 0 and not lines[start - 1].strip():
                start -= 1
            lines = lines[:start] + lines[end:]
            break
    else:
        wanted = set(shown)
        lines = [line for line in lines if line not in wanted]
    return "".join(line + "\n" for line in lines)


def _wrap(line: str) -> list[str]:
    if len(line) <= WRAP_COLUMNS:
        return [line]
    # Imported here: re and textwrap cost the commit hook milliseconds to import, and
    # reasoning composed ahead of the commit is wrapped already.
    import re
    import textwrap

    indent = re.match(_LIST_ITEM, line)
    hanging = " " * (indent.end() if indent else 0)
    wrapped = textwrap.wrap(
        line,
        WRAP_COLUMNS,
        subsequent_indent=hanging,
        break_long_words=False,
        break_on_hyphens=False,
    )
    # One column is kept free for the space that protects a comment-like line.
    limit = MAX_COLUMNS - 1
    return [piece[i : i + limit] for piece in wrapped for i in range(0, len(piece), limit)]


def _record_stage(line: str) -> str | None:
    key, separator, value = line.partition(":")
    if separator and key.strip() == RECORD_TRAILER and value.strip():
        return value.strip()
    return None


def _is_id_line(line: str) -> bool:
    key, separator, value = line.partition(":")
    return bool(separator) and key.strip() == ID_TRAILER and bool(value.strip())


def _last_index(lines: list[str], wanted: str) -> int | None:
    for number in range(len(lines) - 1, -1, -1):
        if lines[number] == wanted:
            return number
    return None


def _contains(block: list[str], new: list[str]) -> bool:
    return " ".join(" ".join(block).split()).find(" ".join(" ".join(new).split())) >= 0


# ---------------------------------------------------------------------------------------
# Reading the reasoning back out of a commit message (`git obversa why`, `blame`, `log`)

# The characters of a trailer token (`git interpret-trailers`): letters, digits, dashes.
_TOKEN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-"
# Lines git itself writes into a trailer paragraph (`commit -s`, `cherry-pick -x`).
_GIT_GENERATED_PREFIXES = ("Signed-off-by: ", "(cherry picked from commit ")
_RECORD_KEY = RECORD_TRAILER.lower()


def parse_reasoning(message: str) -> str | None:
    """The reasoning recorded in a commit message, or None when it holds none.

    That is the text under each line reading exactly `Why:` (what the hook writes), up
    to the trailer paragraph that closes it; failing that, the text of each `## Why`
    section (messages written with `git commit -F` from a record). Blocks indented
    together, as `git merge --squash` indents the squashed messages, are read the same
    way. Several blocks come back in message order, separated by a blank line.
    """
    if WHY_HEADING not in message and LEGACY_WHY_HEADING not in message:
        return None  # most messages: no heading line can be among them
    lines = [line.rstrip() for line in message.replace("\r\n", "\n").split("\n")]
    for heading in (WHY_HEADING, LEGACY_WHY_HEADING):
        blocks = [block for block in _reasoning_blocks(lines, heading) if block]
        if blocks:
            return "\n\n".join(blocks)
    return None


def _reasoning_blocks(lines: list[str], heading: str) -> list[str]:
    """The text under each line reading HEADING (after its own indentation)."""
    blocks = []
    index = 0
    while index < len(lines):
        stripped = lines[index].lstrip(" ")
        if stripped != heading:
            index += 1
            continue
        indent = len(lines[index]) - len(stripped)
        end = index + 1
        while end < len(lines) and not _ends_block(lines[end], indent, heading):
            end += 1
        blocks.append(_block_text([line[indent:] for line in lines[index + 1 : end]]))
        index = end
    return blocks


def _ends_block(line: str, indent: int, heading: str) -> bool:
    if not line:
        return False
    if line[:indent].strip(" "):
        return True  # less indented than the heading: the squashed message is over
    rest = line[indent:]
    if rest in (WHY_HEADING, LEGACY_WHY_HEADING):
        return True
    # A Markdown section of level 1 or 2 ends a `## Why` section.
    return heading == LEGACY_WHY_HEADING and (rest in ("#", "##") or rest.startswith(("# ", "## ")))


def _block_text(lines: list[str]) -> str:
    paragraphs: list[list[str]] = [[]]
    for line in lines:
        if line:
            paragraphs[-1].append(line)
        elif paragraphs[-1]:
            paragraphs.append([])
    if not paragraphs[-1]:
        paragraphs.pop()
    kept: list[list[str]] = []
    for number, paragraph in enumerate(paragraphs):
        # Trailers close the block: the paragraph carrying the hook's own trailer, or
        # the last paragraph (unless it is the only one: then it is the reasoning).
        if is_trailer_paragraph(paragraph) and (
            any(map(_is_record_line, paragraph)) or 0 < number == len(paragraphs) - 1
        ):
            break
        kept.append(paragraph)
    return "\n\n".join("\n".join(paragraph) for paragraph in kept)


def is_trailer_paragraph(lines: list[str]) -> bool:
    """Whether `git interpret-trailers --parse` would take this paragraph as trailers.

    Git's rule: every line is a trailer (or a folded continuation of one), or at least
    a quarter are and one of them is a line git itself generates.
    """
    trailers = others = continuations = 0
    generated = False
    for line in reversed(lines):
        if line.startswith(_GIT_GENERATED_PREFIXES):
            trailers, continuations, generated = trailers + 1, 0, True
        elif _is_trailer_line(line):
            trailers, continuations = trailers + 1, 0
        elif line[:1] in (" ", "\t"):
            continuations += 1
        else:
            others, continuations = others + 1 + continuations, 0
    others += continuations
    return trailers > 0 and (others == 0 or (generated and trailers * 3 >= others))


def _is_trailer_line(line: str) -> bool:
    """A token of letters, digits and dashes, optional blanks, then the separator."""
    token, separator, _ = line.partition(":")
    token = token.rstrip(" \t")
    return bool(separator and token) and not token.strip(_TOKEN_CHARS)


def _is_record_line(line: str) -> bool:
    """The hook's own trailer, `Obversa-Record:` (any case, blanks before the colon)."""
    key = line[: len(_RECORD_KEY)]
    return key.lower() == _RECORD_KEY and line[len(key) :].lstrip(" \t").startswith(":")
