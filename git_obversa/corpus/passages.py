"""The passage model shared by the corpus and its index: tokens, passages, ranking.

Below both `markdown.py` (which reads files and scans them) and `index/` (which narrows
the passages to score), so neither imports the other to split or score text.
"""

from __future__ import annotations

import re
import unicodedata
from typing import NamedTuple

# `[^\W_]` is exactly \p{L}\p{N} in Python's re (checked over every code point).
TOKEN = re.compile(r"[^\W_]+")
# JavaScript's \s and String.prototype.trim() whitespace (Python's \s also takes \x1c-\x1f
# and \x85 and misses \ufeff), so blank lines and headings split as in the original.
JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
BLANK = re.compile(f"[{JS_SPACE}]*")
HEADING = re.compile(f" {{0,3}}#{{1,6}}(?:[{JS_SPACE}]|$)")


# ASCII text needs neither NFKC (it leaves ASCII alone) nor the pattern: its letters and
# digits are [A-Za-z0-9], so one byte table lowercases them and blanks everything else,
# and a split on whitespace gives the same runs as the pattern.
ASCII_TOKEN_BYTES = bytes(
    byte + 32 if 65 <= byte <= 90 else byte if chr(byte).isalnum() and byte < 128 else 32
    for byte in range(256)
)


def tokens(text: str) -> list[str]:
    """NFKC, lowercase, then maximal runs of letters and digits."""
    if text.isascii():
        return text.encode("ascii").translate(ASCII_TOKEN_BYTES).decode("ascii").split()
    return TOKEN.findall(unicodedata.normalize("NFKC", text).lower())


def passages(text: str) -> list[tuple[int, int, str]]:
    """(start_line, end_line, text) per paragraph; a heading line is a passage of its own."""
    normalized = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = normalized.split("\n")
    if normalized.endswith("\n"):
        lines.pop()
    found: list[tuple[int, int, str]] = []
    paragraph: list[str] = []
    start = 0
    for number, line in enumerate(lines, 1):
        heading = HEADING.match(line) is not None
        blank = BLANK.fullmatch(line) is not None
        if paragraph and (heading or blank):
            found.append((start, start + len(paragraph) - 1, "\n".join(paragraph)))
            paragraph = []
        if heading:
            found.append((number, number, line))
        elif not blank:
            if not paragraph:
                start = number
            paragraph.append(line)
    if paragraph:
        found.append((start, start + len(paragraph) - 1, "\n".join(paragraph)))
    return found


def rank(query: list[str], words: str) -> tuple[int, int, int] | None:
    """(exact, matched terms, frequency) of a passage whose tokens, joined by single spaces,
    are WORDS; None when no query term occurs in it."""
    found = words.split(" ")
    matched = frequency = 0
    for term in dict.fromkeys(query):
        count = found.count(term)
        matched += count > 0
        frequency += count
    if not matched:
        return None
    # Tokens hold no spaces, so the phrase occurs iff its space-joined form does.
    exact = f" {' '.join(query)} " in f" {words} "
    return int(exact), matched, frequency


class CorpusFile(NamedTuple):
    """One searchable file: its memory path, what its source reads it by, and what
    identifies its current content (size, mtime and inode on disk; the blob id in Git).
    A tuple because a warm indexed search lists every file of the corpus."""

    path: str
    key: str
    identity: str
