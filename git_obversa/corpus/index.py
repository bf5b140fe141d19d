"""An on-disk passage index for Markdown corpora: one memory-mapped file, standard library only.

The index finds the passages that can be among a query's best without reading the corpus,
and `markdown.py` scores and orders them with the same function a full scan uses, so indexed
and unindexed search give the same hits. A warm query lists the corpus (a `stat` per file
on disk) and reads nothing else but the index; a Git tree is known by its id, so a warm
query of a tree the index holds lists nothing at all.

The file (`<name>.index`) holds, after a small header:

- per document (sorted by path): its path, its identity (size, mtime in ns and inode on
  disk; the blob id in Git), its first passage number, and one zlib block with its
  passages' lines and byte lengths (32-bit numbers), then their texts;
- per term (sorted): its passages, grouped by how often the term occurs in them, highest
  count first, as one array of 32-bit passage numbers; a CRC-32 per term covers them.

Passages are numbered in (path, line) order, so the order in which ties are broken is the
order of the numbers. A query walks the postings of its terms from the highest count down
(the threshold algorithm) and ranks the passages it meets from the postings; it stops
as soon as the passage in `limit`-th place beats anything a passage not met yet could
score, or ties with it in a way that only path and line (the passage number) can decide.

The file is written whole to a temporary file and renamed over the old one, so readers
(which map the file they opened) never see a partial index, and it is never changed in
place. It is checked before it is used: magic, version, byte order, a CRC-32 of every table
when it is opened, and of a term's postings when a query first reads them; the zlib
blocks carry their own checksum. Anything that does not check out is rebuilt from the
corpus. A change to the corpus reads only the files whose identity changed, into an
overlay (`<name>.overlay`, the same format) that also names the base's files it replaces
and the generation of that base; queries merge the two. Past 1/OVERLAY_SHARE of the
base's files, a new base is written, with the unchanged files' blocks and postings taken
from the old one.

Where it lives: for a Git tree, `<common git dir>/obversa/corpus/`; for a directory,
`$XDG_CACHE_HOME/git-obversa/corpus/` (default `~/.cache`). One file per corpus (and its
overlay), about the size of the corpus or less, safe to delete at any time. If the index
cannot be written, search falls back to a full scan.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import mmap
import os
import secrets
import struct
import sys
import time
import zlib
from array import array
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict, deque
from functools import partial
from itertools import accumulate, chain, compress, filterfalse, islice, repeat
from operator import add, eq, ge, is_not, lt, neg, not_, truth
from pathlib import Path
from typing import Any

from git_obversa.corpus.passages import CorpusFile, passages, rank, tokens

FORMAT_VERSION = 5  # 1-3 were SQLite databases (`<name>.sqlite`)
MAGIC = b"obversa\x1a"
HEADER = struct.Struct("<8sIII")  # magic, version, meta length, meta CRC-32
# Tables checked whole when the file is opened; "postings" is checked per term, "blocks"
# per document (against "block_crcs") the first time a query reads it.
TABLES = (
    "paths",
    "identities",
    "first_passage",
    "block_ends",
    "block_crcs",
    "terms",
    "term_ends",
    "posting_ends",
    "group_ends",
    "group_counts",
    "group_stops",
    "term_crcs",
)
FILES_PER_READ = 256  # files read from the source at a time while building
DECOMPRESS_STEP = 4096  # bytes decompressed at a time while looking for one passage
COMPRESSION = 1  # zlib level: 4 makes the blocks 7% smaller for 80% more time
# Postings read per term per round: the first round is cheap for a rare term, and the
# chunk doubles so that a long walk down a common term takes few rounds.
FIRST_CHUNK, LAST_CHUNK = 64, 8192
KEPT = partial(is_not, None)
# Renumbering a group of postings after an update: by runs of unchanged files (bisect and
# copy) when it is long and the runs few, else number by number.
SHORT_GROUP, MANY_RUNS = 32, 16
ONE = (1).to_bytes(4, sys.byteorder)  # passage number 1 as a postings table holds it
TABLE_AFTER = 64  # a term asked about 1/64 of its passages answers from a table
MANY = 1 << 62  # more than any count or number of postings
# Counting a term in passages: a count group at most this many times their number long is
# intersected with them as a set (in C), a longer one bisected per passage.
INTERSECT_BELOW = 16
STALE_TEMPORARY = 3600  # seconds after which a writer's leftover temporary file is removed
KEPT_OPEN = 8  # indexes kept mapped by one process
# What a long-lived process (a server, a kept corpus) keeps of an index between queries,
# per index: the terms last queried with the sets and tables their counting built (at
# most KEPT_TERMS, holding at most KEPT_MEMBERS passage numbers in all), and the text of
# the documents last read (at most KEPT_TEXT bytes).
KEPT_TERMS, KEPT_MEMBERS, KEPT_TEXT = 256, 1 << 17, 1 << 21
# An overlay holds the files changed since its base was written; one that would hold more
# than 1/OVERLAY_SHARE of the base's files is merged into a new base instead.
OVERLAY_SHARE = 32


class CorruptIndex(Exception):
    """The index file does not check out; it is rebuilt from the corpus."""


class Unwritable(Exception):
    """The index file could not be written (the caller scans instead)."""


def cache_home() -> Path:
    configured = os.environ.get("XDG_CACHE_HOME")
    return Path(configured) if configured else Path.home() / ".cache"


_index_files: dict[tuple[str, str], Path] = {}  # found by `index_file`, per process


def index_file(source: Any) -> Path:
    """Where SOURCE's index lives: beside the repository for a Git tree, else in the cache."""
    common_dir = getattr(source, "common_dir", None)
    if common_dir is not None:
        home, name = os.fspath(common_dir), f"git:{source.directory}"
    else:
        home, name = os.fspath(cache_home()), os.path.realpath(source.directory)
    found = _index_files.get((home, name))
    if found is None:
        base = Path(home) / ("obversa" if common_dir is not None else "git-obversa") / "corpus"
        digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:32]
        if len(_index_files) >= KEPT_OPEN:
            _index_files.clear()
        found = _index_files[home, name] = base / f"{digest}.index"
    return found


class Term:
    """One term's postings: positions [start, end) of the postings array, in groups of
    (count, stop) from the highest count down, each group in passage order."""

    __slots__ = ("start", "end", "groups", "ranges", "asked", "table", "sets", "kept")

    def __init__(self, start: int, end: int, groups: list[tuple[int, int]]) -> None:
        self.start, self.end, self.groups = start, end, groups
        starts = [start] + [stop for _, stop in groups[:-1]]
        # Lowest count first: the largest groups, where a passage is most likely found.
        self.ranges = [
            (count, low, stop) for (count, stop), low in zip(groups, starts, strict=True)
        ][::-1]
        self.asked = 0
        self.table: dict[int, int] | None = None
        self.sets: dict[int, set[int]] = {}  # by number in `ranges`: a group's passages
        self.kept = 0  # passage numbers its sets and table held when last counted as kept

    def members(self) -> int:
        """How many passage numbers its sets and table hold."""
        return sum(map(len, self.sets.values())) + len(self.table or ())

    def counts(self, postings: memoryview, passages: list[int], position: int) -> list[int]:
        """How often the term occurs in each of PASSAGES, none of them among its postings
        before POSITION: from the table if one was made, else per count group by a set
        intersection in C (the group's set is kept for the next call) when the group is
        small beside PASSAGES, by bisection otherwise."""
        if self.table is not None:
            return list(map(self.table.get, passages, repeat(0)))
        found: dict[int, int] = {}
        wanted, left = set(passages), passages  # LEFT: not found in a group yet
        for number, (count, low, high) in enumerate(self.ranges):
            if high <= position or not left:
                break
            if len(left) < len(wanted):
                wanted = set(left)
            members = self.sets.get(number)
            if members is None and high - low <= INTERSECT_BELOW * len(left):
                # Passages before POSITION are never asked about: the whole group will do.
                members = self.sets[number] = set(postings[low:high])
            if members is not None:
                held: Any = wanted & members
            else:
                # Bisect the group for every passage at once (in C), then keep those found.
                group = postings[max(low, position) : high]
                last = len(group) - 1
                places = map(min, map(bisect_left, repeat(group), left), repeat(last))
                held = list(compress(left, map(eq, map(group.__getitem__, places), left)))
            if held:
                found.update(zip(held, repeat(count)))
                left = list(filterfalse(found.__contains__, left))
        return list(map(found.get, passages, repeat(0)))

    def _make_table(self, postings: memoryview) -> None:
        self.table = {}
        for count, low, high in self.ranges:
            self.table.update(zip(postings[low:high], repeat(count)))

    def count(self, postings: memoryview, passage: int, position: int) -> int:
        """How often the term occurs in PASSAGE, known not to be among its postings before
        POSITION (0: not at all): by bisecting each group from there on, or, once asked
        about more passages than a 64th of its postings, from a table of them all (made
        in C; a passage met in what was read is never asked about, so the table may
        hold what was read too)."""
        if self.table is not None:
            return self.table.get(passage, 0)
        self.asked += 1
        if self.asked * TABLE_AFTER > self.end - self.start:
            self._make_table(postings)
            return self.table.get(passage, 0)
        for count, low, high in self.ranges:
            if high <= position:
                break
            low = max(low, position)
            at = bisect_left(postings, passage, low, high)
            if at < high and postings[at] == passage:
                return count
        return 0


class Index:
    """A mapped index file, checked when opened; `close()` unmaps it."""

    def __init__(self, descriptor: int) -> None:
        self.identity = _file_identity(os.fstat(descriptor))
        if self.identity[2] < HEADER.size:
            raise CorruptIndex("too short")
        self.map = mmap.mmap(descriptor, 0, access=mmap.ACCESS_READ)
        self.views: list[memoryview] = []
        try:
            self._load()
        except CorruptIndex:
            self.close()
            raise
        except (ValueError, TypeError, KeyError, IndexError, UnicodeError, struct.error) as error:
            self.close()
            raise CorruptIndex(str(error)) from None
        self.verified: set[int] = set()  # terms whose postings were checked
        self.checked: set[int] = set()  # documents whose block was checked
        # Kept between queries, most recently used last (see KEPT_TERMS): by number, the
        # terms and the (text, header) of the documents' blocks decompressed so far.
        self.kept_terms: dict[int, Term] = {}
        self.kept_texts: dict[int, tuple[bytes, Any]] = {}
        self.kept_members = self.kept_bytes = 0  # what they hold in all

    def _load(self) -> None:
        magic, version, meta_size, meta_crc = HEADER.unpack_from(self.map, 0)
        if magic != MAGIC or version != FORMAT_VERSION:
            raise CorruptIndex("not an index of this version")
        meta_bytes = self.map[HEADER.size : HEADER.size + meta_size]
        if len(meta_bytes) != meta_size or zlib.crc32(meta_bytes) != meta_crc:
            raise CorruptIndex("header checksum")
        meta = json.loads(meta_bytes)
        if meta["byteorder"] != sys.byteorder:
            raise CorruptIndex("written on a machine of the other byte order")
        self.meta, self.body = meta, _aligned(HEADER.size + meta_size)
        self.listing, self.tree = meta["listing"], meta["tree"]
        # A base index has a generation; an overlay names the generation of its base.
        self.generation, self.base = meta.get("generation"), meta.get("base")
        self.removed: list[int] = meta.get("removed", [])
        if not isinstance(self.removed, list):
            raise CorruptIndex("removed documents")
        self.documents, self.passages, self.terms = (
            meta["documents"],
            meta["passages"],
            meta["terms"],
        )
        whole = memoryview(self.map)
        self.views.append(whole)
        sections = {}
        for name, (offset, size, crc) in meta["sections"].items():
            start = self.body + offset
            if offset < 0 or size < 0 or start + size > len(self.map):
                raise CorruptIndex(f"{name} lies outside the file")
            sections[name] = (whole[start : start + size], crc)
            self.views.append(sections[name][0])
        for name in TABLES:
            if zlib.crc32(sections[name][0]) != sections[name][1]:
                raise CorruptIndex(f"{name} checksum")
        self.sections = sections

        def numbers(name: str, kind: str, length: int) -> memoryview:
            view = sections[name][0].cast(kind)
            self.views.append(view)
            if len(view) != length:
                raise CorruptIndex(f"{name} has {len(view)} entries, not {length}")
            return view

        documents, terms = self.documents, self.terms
        self.first_passage = numbers("first_passage", "I", documents + 1)
        self.block_ends = numbers("block_ends", "Q", documents + 1)
        self.block_crcs = numbers("block_crcs", "I", documents)
        self.term_ends = numbers("term_ends", "I", terms + 1)
        self.posting_ends = numbers("posting_ends", "I", terms + 1)
        self.group_ends = numbers("group_ends", "I", terms + 1)
        groups = self.group_ends[terms]
        self.group_counts = numbers("group_counts", "I", groups)
        self.group_stops = numbers("group_stops", "I", groups)
        self.term_crcs = numbers("term_crcs", "I", terms)
        self.postings = numbers("postings", "I", self.posting_ends[terms])
        for view in (self.first_passage, self.block_ends, self.term_ends, self.posting_ends):
            if view[0] != 0 or any(map(int.__gt__, view[:-1], view[1:])):
                raise CorruptIndex("offsets out of order")
        if self.first_passage[documents] != self.passages:
            raise CorruptIndex("passage count")
        if self.block_ends[documents] != len(sections["blocks"][0]):
            raise CorruptIndex("blocks size")
        if self.term_ends[terms] != len(sections["terms"][0]):
            raise CorruptIndex("terms size")
        self.term_text = sections["terms"][0]

    def removed_passages(self, base: Index) -> set[int]:
        """The passages of BASE whose documents this overlay holds anew or knows are gone."""
        found = self.__dict__.get("_removed_passages")
        if found is None:
            found, first = set(), base.first_passage
            for document in self.removed:
                if not (isinstance(document, int) and 0 <= document < base.documents):
                    raise CorruptIndex("a removed document out of range")
                found.update(range(first[document], first[document + 1]))
            self.__dict__["_removed_passages"] = found
        return found

    def close(self) -> None:
        for view in reversed(self.views):
            view.release()
        self.views = []
        self.map.close()

    # -- what a query reads ------------------------------------------------------------------

    def term(self, token: str) -> Term | None:
        """TOKEN's postings, checked against their CRC the first time; None if no passage
        holds it."""
        key = token.encode("utf-8", "surrogateescape")
        ends, text = self.term_ends, self.term_text
        low, high = 0, self.terms
        while low < high:
            middle = (low + high) // 2
            if text[ends[middle] : ends[middle + 1]].tobytes() < key:
                low = middle + 1
            else:
                high = middle
        if low == self.terms or text[ends[low] : ends[low + 1]] != key:
            return None
        kept = self.kept_terms.pop(low, None)
        if kept is None:
            kept = self.term_at(low)
        self.kept_terms[low] = kept
        return kept

    def term_at(self, number: int) -> Term:
        """The postings of the NUMBER-th term, checked against their CRC the first time."""
        start, end = self.posting_ends[number], self.posting_ends[number + 1]
        first, last = self.group_ends[number], self.group_ends[number + 1]
        if number not in self.verified:
            crc = zlib.crc32(self.postings[start:end])
            crc = zlib.crc32(self.group_counts[first:last], crc)
            crc = zlib.crc32(self.group_stops[first:last], crc)
            if crc != self.term_crcs[number]:
                raise CorruptIndex(f"postings of term {number}")
            self.verified.add(number)
        groups = list(zip(self.group_counts[first:last], self.group_stops[first:last], strict=True))
        if not groups or groups[-1][1] != end or groups[0][1] <= start:
            raise CorruptIndex(f"groups of term {number}")
        return Term(start, end, groups)

    def term_list(self) -> list[str]:
        """Every term, in order."""
        text, ends = self.term_text.tobytes(), self.term_ends
        return [
            text[ends[number] : ends[number + 1]].decode("utf-8", "surrogateescape")
            for number in range(self.terms)
        ]

    def text(self, passage: int, cache: dict) -> tuple[int, int, str]:
        """(start line, end line, text) of PASSAGE. A document's block starts with its
        passages' number, then their lines and byte lengths (32-bit numbers), then their
        texts in order, so only as much of it is decompressed as reaches PASSAGE. The
        compressed block is checked against its CRC-32 the first time it is read."""
        document, ordinal = self.locate(passage)
        found = cache.get(document)
        if found is None:
            kept = self.kept_texts.get(document)
            if kept is not None:
                data, (spans, offsets) = kept
                if ordinal + 1 < len(offsets) and len(data) >= offsets[ordinal + 1]:
                    text = data[offsets[ordinal] : offsets[ordinal + 1]]
                    start, end = spans[3 * ordinal], spans[3 * ordinal + 1]
                    return start, end, text.decode("utf-8", "surrogateescape")
            blocks = self.sections["blocks"][0]
            block = blocks[self.block_ends[document] : self.block_ends[document + 1]]
            if document not in self.checked:
                if zlib.crc32(block) != self.block_crcs[document]:
                    raise CorruptIndex(f"block of document {document}")
                self.checked.add(document)
            found = cache[document] = [zlib.decompressobj(), b"", block, None]
        decompressor, data, rest, header = found
        while True:
            if header is None and len(data) >= 4:
                size = 4 + 12 * int.from_bytes(data[:4], sys.byteorder)
                if len(data) >= size:
                    spans = array("I", data[4:size])
                    header = found[3] = (spans, list(accumulate(spans[2::3], initial=size)))
            if header is not None:
                if ordinal + 1 >= len(header[1]):
                    raise CorruptIndex("a document's block holds fewer passages")
                if len(data) >= header[1][ordinal + 1]:
                    break
            if decompressor.eof:
                raise CorruptIndex("a document's block ends early")
            more = decompressor.decompress(rest, DECOMPRESS_STEP)
            rest = decompressor.unconsumed_tail
            if not more and not decompressor.eof:
                raise CorruptIndex("a document's block ends early")
            data += more
        found[1:3] = [data, rest]
        spans, offsets = header
        text = data[offsets[ordinal] : offsets[ordinal + 1]].decode("utf-8", "surrogateescape")
        return spans[3 * ordinal], spans[3 * ordinal + 1], text

    def keep(self, cache: dict, terms: list[Term]) -> None:
        """Keep what a query decompressed (CACHE, as `text` filled it) and the sets and
        tables its TERMS built, within bounds, dropping the least recently used first.
        Other threads may query the same index meanwhile: entries are only ever added or
        removed whole, and the running totals only steer the trimming."""
        texts = self.kept_texts
        for document, (_, data, _, header) in cache.items():
            if header is not None:
                held = texts.pop(document, None)
                if held is not None and len(held[0]) >= len(data):
                    texts[document] = held
                else:
                    texts[document] = (data, header)
                    self.kept_bytes += len(data) - (len(held[0]) if held else 0)
        for term in terms:
            members = term.members()
            self.kept_members += members - term.kept
            term.kept = members
        kept_terms = self.kept_terms
        try:
            while self.kept_bytes > KEPT_TEXT and texts:
                self.kept_bytes -= len(texts.pop(next(iter(texts)))[0])
            while kept_terms and (len(kept_terms) > KEPT_TERMS or self.kept_members > KEPT_MEMBERS):
                self.kept_members -= kept_terms.pop(next(iter(kept_terms))).kept
        except (KeyError, RuntimeError):  # another thread trimmed meanwhile
            pass

    def words(self, passage: int, cache: dict) -> str:
        """PASSAGE's tokens joined by spaces, made from its text."""
        return " ".join(tokens(self.text(passage, cache)[2]))

    def locate(self, passage: int) -> tuple[int, int]:
        """(document, ordinal within it) of PASSAGE."""
        if not 0 <= passage < self.passages:
            raise CorruptIndex("passage number out of range")
        # The last document whose first passage is <= PASSAGE.
        document = bisect_right(self.first_passage, passage, 0, self.documents) - 1
        return document, passage - self.first_passage[document]

    def passage(self, passage: int, cache: dict) -> tuple[str, int, int, str, str]:
        """(path, start line, end line, text, tokens joined by spaces) of PASSAGE."""
        start, end, text = self.text(passage, cache)
        return self.path(self.locate(passage)[0]), start, end, text, " ".join(tokens(text))

    def path(self, document: int) -> str:
        return self.listing_of("paths")[document]

    def listing_of(self, name: str) -> list[str]:
        """The paths or the identities of every document, in order."""
        cached = self.__dict__.get(name)
        if cached is None:
            cached = self.sections[name][0].tobytes().decode("utf-8", "surrogateescape")
            cached = cached.split("\n") if self.documents else []
            if len(cached) != self.documents:
                raise CorruptIndex(f"{name} count")
            self.__dict__[name] = cached
        return cached


def _aligned(offset: int) -> int:
    return (offset + 7) & ~7


def _file_identity(info: os.stat_result) -> tuple[int, int, int, int]:
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


# -- opening, kept per process ------------------------------------------------------------------

_open_indexes: dict[str, Index] = {}


def _forget(path: Path) -> None:
    index = _open_indexes.pop(str(path), None)
    if index is not None:
        try:
            index.close()
        except BufferError:  # a view still in use somewhere; the mapping goes with it
            pass


def _keep(path: Path, index: Index) -> Index:
    _forget(path)
    while len(_open_indexes) >= KEPT_OPEN:
        _forget(Path(next(iter(_open_indexes))))
    _open_indexes[str(path)] = index
    return index


def open_index(path: Path) -> Index | None:
    """The index at PATH, checked; None when there is none or it does not check out (the
    caller rebuilds it). A file this process already checked is reused while it is the
    same file (device, inode, size, mtime)."""
    try:
        info = os.stat(path)
    except OSError:
        _forget(path)
        return None
    kept = _open_indexes.get(str(path))
    if kept is not None and kept.identity == _file_identity(info):
        return kept
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        return _keep(path, Index(descriptor))
    except (CorruptIndex, OSError, ValueError):
        _forget(path)
        return None
    finally:
        os.close(descriptor)


# -- building -----------------------------------------------------------------------------------


def _document_passages(text: str) -> tuple[list[list[str]], list[tuple[int, int, str]]]:
    """The token lists and (start, end, text) of TEXT's passages that hold a token."""
    found_tokens, found = [], []
    for start, end, passage in passages(text):
        passage_tokens = tokens(passage)
        if passage_tokens:  # a passage without a token can never be a hit
            found_tokens.append(passage_tokens)
            found.append((start, end, passage))
    return found_tokens, found


def build(
    source: Any,
    files: list[CorpusFile],
    listing: str,
    tree: str | None,
    previous: Index | None,
    path: Path,
    base: tuple[Index, list[int]] | None = None,
) -> Index:
    """Write the index of FILES to PATH and return it, mapped. Files whose identity
    PREVIOUS holds keep their block and postings (renumbered); the others are read from
    SOURCE and tokenized. With BASE (an index and the numbers of its documents that are
    gone), the index written is an overlay of that base."""
    files = sorted(files, key=lambda file: file.path)
    reusable: dict[str, tuple[str, int]] = {}
    if previous is not None:
        paths, identities = previous.listing_of("paths"), previous.listing_of("identities")
        reusable = {path: (identities[number], number) for number, path in enumerate(paths)}
    # The new number of each passage of PREVIOUS (None: its file changed or went away).
    renumbered: list[int | None] = [None] * (previous.passages if previous else 0)
    # The same as runs [old first, old end, shift] of unchanged files: few after a few edits.
    shifts: list[list[int]] = []
    occurrences: defaultdict[str, list[int]] = defaultdict(list)
    holding, append = occurrences.__getitem__, list.append
    first_passage, block_ends, block_crcs = array("I", [0]), array("Q", [0]), array("I")
    blocks: list[bytes] = []
    passage = size = 0
    for begin in range(0, len(files), FILES_PER_READ):
        batch = files[begin : begin + FILES_PER_READ]
        fresh = [file for file in batch if reusable.get(file.path, ("",))[0] != file.identity]
        read = source.read(fresh) if fresh else []
        texts = dict(zip([file.path for file in fresh], read, strict=True))
        for file in batch:
            if file.path in texts:
                token_lists, found = _document_passages(texts[file.path])
                encoded = [text.encode("utf-8", "surrogateescape") for _, _, text in found]
                header = array("I", [len(found)])
                for (start, end, _), data in zip(found, encoded, strict=True):
                    header.extend((start, end, len(data)))
                block = zlib.compress(header.tobytes() + b"".join(encoded), COMPRESSION)
                # Each occurrence appends its passage number to its term's list, in C: a
                # term holds a passage as many times as it occurs there, in passage order.
                lengths = map(len, token_lists)
                numbers = map(repeat, range(passage, passage + len(token_lists)), lengths)
                deque(
                    map(
                        append,
                        map(holding, chain.from_iterable(token_lists)),
                        chain.from_iterable(numbers),
                    ),
                    0,
                )
                count = len(token_lists)
            else:
                assert previous is not None
                number = reusable[file.path][1]
                ends, firsts = previous.block_ends, previous.first_passage
                block = previous.sections["blocks"][0][ends[number] : ends[number + 1]].tobytes()
                count = firsts[number + 1] - firsts[number]
                renumbered[firsts[number] : firsts[number + 1]] = range(passage, passage + count)
                shift = passage - firsts[number]
                if shifts and shifts[-1][1] == firsts[number] and shifts[-1][2] == shift:
                    shifts[-1][1] = firsts[number + 1]
                else:
                    shifts.append([firsts[number], firsts[number + 1], shift])
            passage += count
            first_passage.append(passage)
            blocks.append(block)
            block_crcs.append(zlib.crc32(block))
            size += len(block)
            block_ends.append(size)

    old_terms = previous.term_list() if previous is not None else []
    old_number = {term: number for number, term in enumerate(old_terms)}
    terms = sorted(old_number.keys() | occurrences.keys())
    term_text = bytearray()
    term_ends, posting_ends, group_ends = array("I", [0]), array("I", [0]), array("I", [0])
    group_counts, group_stops, term_crcs, postings = array("I"), array("I"), array("I"), array("I")
    kept_terms = []
    for term in terms:
        groups: dict[int, list[int]] = {}
        number = old_number.get(term)
        if number is not None:
            # Unchanged files keep their order, so each group stays in passage order.
            old = previous.term_at(number)
            low = old.start
            for count, stop in old.groups:
                moved = _renumber(previous.postings, low, stop, renumbered, shifts)
                if moved:
                    groups[count] = moved
                low = stop
        held = occurrences.pop(term, None)
        if held:
            # HELD is in passage order: strictly increasing means each passage once.
            if all(map(lt, held, islice(held, 1, None))):
                added = {1: held}
            else:
                counts = Counter(held)  # passage -> occurrences
                # Highest count first; the sort is stable, so each group stays in order.
                ordered = sorted(counts, key=counts.__getitem__, reverse=True)
                sizes = Counter(counts.values())  # count -> passages holding it so often
                added, at = {}, 0
                for count in sorted(sizes, reverse=True):
                    added[count] = ordered[at : at + sizes[count]]
                    at += sizes[count]
            for count, numbers in added.items():
                if count in groups:
                    groups[count] = sorted(chain(groups[count], numbers))
                else:
                    groups[count] = numbers
        if not groups:
            continue  # only in files that changed or went away
        start = len(postings)
        own_counts, own_stops = array("I"), array("I")
        for count in sorted(groups, reverse=True):
            postings.extend(groups[count])
            own_counts.append(count)
            own_stops.append(len(postings))
        crc = zlib.crc32(memoryview(postings)[start:])
        crc = zlib.crc32(own_counts, crc)
        term_crcs.append(zlib.crc32(own_stops, crc))
        group_counts.extend(own_counts)
        group_stops.extend(own_stops)
        term_text += term.encode("utf-8", "surrogateescape")
        term_ends.append(len(term_text))
        posting_ends.append(len(postings))
        group_ends.append(len(group_counts))
        kept_terms.append(term)

    sections: dict[str, Any] = {
        "paths": "\n".join(file.path for file in files).encode("utf-8", "surrogateescape"),
        "identities": "\n".join(file.identity for file in files).encode("utf-8", "surrogateescape"),
        "first_passage": first_passage,
        "block_ends": block_ends,
        "block_crcs": block_crcs,
        "terms": term_text,
        "term_ends": term_ends,
        "posting_ends": posting_ends,
        "group_ends": group_ends,
        "group_counts": group_counts,
        "group_stops": group_stops,
        "term_crcs": term_crcs,
        "postings": postings,
    }
    meta = {
        "listing": listing,
        "tree": tree,
        "documents": len(files),
        "passages": passage,
        "terms": len(kept_terms),
        "byteorder": sys.byteorder,
    }
    if base is None:
        meta["generation"] = secrets.token_hex(8)
    else:
        meta.update(base=base[0].generation, removed=base[1])
    return _write(path, meta, sections, blocks)


def _renumber(
    postings: memoryview, low: int, stop: int, renumbered: list, shifts: list[list[int]]
) -> Any:
    """The new numbers of the passages in POSTINGS[LOW:STOP] (ascending) whose files are
    unchanged, in the same order. With few runs of unchanged files, each run is found by
    bisection and copied (shift 0) or shifted in C; otherwise each number is looked up."""
    if len(shifts) > MANY_RUNS or stop - low < SHORT_GROUP:
        return list(filter(KEPT, map(renumbered.__getitem__, postings[low:stop])))
    moved = array("I")
    for first, end, shift in shifts:
        begin = bisect_left(postings, first, low, stop)
        finish = bisect_left(postings, end, begin, stop)
        if begin == finish:
            continue
        run = postings[begin:finish].cast("B")
        moved.frombytes(_shifted(run, shift) if shift else run)
    return moved


def _shifted(run: memoryview, shift: int) -> bytes:
    """RUN (native 32-bit passage numbers) with SHIFT added to each, in C: read as one
    big integer whose digits are the numbers, every digit gains SHIFT at once. No number
    leaves 0..2**32-1 (each is a passage number before and after), so nothing carries
    from one digit into the next."""
    ones = int.from_bytes(ONE * (len(run) // 4), sys.byteorder)
    total = int.from_bytes(run, sys.byteorder) + shift * ones
    return total.to_bytes(len(run), sys.byteorder)


def _write(path: Path, meta: dict, sections: dict[str, Any], blocks: list[bytes]) -> Index:
    """Write the index to a temporary file beside PATH, map it, and rename it over PATH."""
    layout, offset = {}, 0
    sizes = {name: memoryview(data).nbytes for name, data in sections.items()}
    sizes["blocks"] = sum(map(len, blocks))
    for name, size in sizes.items():
        layout[name] = offset
        offset = _aligned(offset + size)
    crcs = {name: zlib.crc32(data) for name, data in sections.items()}
    crc = 0
    for block in blocks:
        crc = zlib.crc32(block, crc)
    crcs["blocks"] = crc
    meta = dict(meta, sections={name: [layout[name], sizes[name], crcs[name]] for name in sizes})
    meta_bytes = json.dumps(meta, sort_keys=True).encode()
    header = HEADER.pack(MAGIC, FORMAT_VERSION, len(meta_bytes), zlib.crc32(meta_bytes))
    body = _aligned(len(header) + len(meta_bytes))

    def write(handle: Any) -> None:
        handle.write(header + meta_bytes)
        for name in sizes:
            handle.seek(body + layout[name])
            if name == "blocks":
                handle.writelines(blocks)
            else:
                handle.write(sections[name])
        # Every section lies inside the file, even an empty one at the end (an overlay
        # that only records a tree, or an empty corpus).
        handle.truncate(body + offset)

    return _replace(path, write)


def _replace(path: Path, write: Any) -> Index:
    """Have WRITE fill a new file beside PATH, map it, and rename it over PATH (readers keep
    the file they mapped). Old-format and stale temporary files of PATH are removed."""
    # Made like any new file (the umask applies, as it did to the SQLite database), under
    # a name no other writer picks.
    temporary = path.parent / f"{path.name}.{os.getpid()}-{secrets.token_hex(6)}.tmp"
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    try:
        descriptor = os.open(temporary, flags, 0o666)
    except OSError as error:
        raise Unwritable(str(error)) from None
    try:
        with open(descriptor, "wb", closefd=False) as handle:
            write(handle)
        index = Index(descriptor)
        os.replace(temporary, path)
    except BaseException as error:
        os.unlink(temporary)
        if isinstance(error, OSError):
            raise Unwritable(str(error)) from None
        raise
    finally:
        os.close(descriptor)
    _keep(path, index)
    _remove_leftovers(path)
    return index


def _remove_leftovers(path: Path) -> None:
    legacy = path.with_suffix(".sqlite")
    for old in (legacy, Path(f"{legacy}-wal"), Path(f"{legacy}-shm")):
        try:
            old.unlink()
        except OSError:
            pass
    now = time.time()
    for leftover in path.parent.glob(f"{path.name}.*.tmp"):
        try:
            if now - leftover.stat().st_mtime > STALE_TEMPORARY:
                leftover.unlink()
        except OSError:
            pass


def retag(index: Index, path: Path, tree: str | None) -> Index:
    """The same index recorded as holding TREE (another tree with the same files)."""
    meta_bytes = json.dumps(dict(index.meta, tree=tree), sort_keys=True).encode()
    header = HEADER.pack(MAGIC, FORMAT_VERSION, len(meta_bytes), zlib.crc32(meta_bytes))

    def write(handle: Any) -> None:
        handle.write(header + meta_bytes)
        handle.seek(_aligned(len(header) + len(meta_bytes)))
        handle.write(index.map[index.body :])

    return _replace(path, write)


# -- querying -----------------------------------------------------------------------------------


def best(
    index: Index, query_tokens: list[str], limit: int, removed: set[int] | frozenset = frozenset()
) -> list[tuple[str, int, int, str, str]]:
    """The LIMIT best passages for QUERY_TOKENS as (path, start, end, text, words), found
    with the threshold algorithm over each term's postings, highest count first.

    A passage's rank is (exact, matched terms, frequency), then path and line (its number).
    After a term's postings were read down to count c, a passage not met yet holds that
    term at most c times, and not at all once the term's postings are used up. So it can
    match at most the terms not used up, count at most the sum of their c, and be exact
    only if no term is used up. Once the passage in LIMIT-th place ranks strictly above
    that bound, no passage not met yet can enter the LIMIT best. A passage met whose own
    bound (what was read of it, and the terms' bounds for the rest) is already below the
    LIMIT-th is never scored.

    A passage is ranked from the postings: the terms read with it, and the others found
    by bisecting each count group of their postings. Only whether a passage holding every
    term holds them as the exact phrase needs its tokens: that is checked for the passages
    that reach the LIMIT best, and cross-checks the postings (a mismatch is a corrupt
    index).

    REMOVED passages (of files an overlay holds anew, or that are gone) are passed over
    as if met and dismissed: they only ever lower what is found, never the bound.
    """
    unique = list(dict.fromkeys(query_tokens))
    terms = [term for term in map(index.term, unique) if term is not None]
    phrase = len(query_tokens) > 1  # only then can a passage holding every term be inexact
    postings = index.postings
    position = {term: term.start for term in terms}
    group = dict.fromkeys(terms, 0)  # the group holding the term's next posting
    bound = dict.fromkeys(terms, MANY)
    # passage -> (-exact, -matched, -frequency, passage); the passage number orders ties
    # as path and line do.
    scored: dict[int, tuple[int, int, int, int]] = {}
    unsettled: set[int] = set()  # holding every term, ranked as exact until checked
    # met, but could not rank above the LIMIT-th when met (or removed)
    dismissed: set[int] = set(removed)
    last = (1, 1, 1)  # the rank (negated) of the LIMIT-th passage so far: none yet
    blocks: dict = {}
    chunk = FIRST_CHUNK

    def score(found: Any) -> None:
        """Rank FOUND, (passage, {term: count} already known) pairs, from the postings."""
        for passage, known in found:
            matched = frequency = 0
            for term in terms:
                count = known.get(term)
                if count is None:
                    # Not met in what was read of the term: it is in the rest, or nowhere.
                    count = term.count(postings, passage, position[term]) if bound[term] else 0
                matched += count > 0
                frequency += count
            if not matched:
                raise CorruptIndex("a passage lacks the term it is posted under")
            if phrase and matched == len(unique):
                unsettled.add(passage)
            scored[passage] = (-int(matched == len(unique)), -matched, -frequency, passage)

    def score_part(term: Term, count: int, part: list[int]) -> None:
        """Rank PART, passages that hold TERM COUNT times and were not read for any other
        term, from the other terms' postings, the shortest first. After each term, the
        passages that could not rank above the LIMIT-th whatever they hold of the terms
        not counted yet are dismissed, so the long terms are counted for fewer."""
        others = sorted(
            (other for other in terms if other is not term and bound[other]),
            key=lambda other: other.end - position[other],
        )
        everything = len(unique)
        matched, frequency = [1] * len(part), [count] * len(part)
        for number, other in enumerate(others):
            column = other.counts(postings, part, position[other])
            matched = list(map(add, matched, map(truth, column)))
            frequency = list(map(add, frequency, column))
            rest = others[number + 1 :]
            if not rest or last[0] > 0:
                continue
            # A passage that matched M terms so far and holds F occurrences ranks at best
            # as if it held every term left as often as its bound: below the LIMIT-th
            # when that is worse, by the terms matched, or by frequency alone.
            most, rest_bound = len(rest), sum(bound[later] for later in rest)
            needed = [MANY] * (everything + 1)
            for held in range(1, everything - most + 1):
                best_case = (-int(held + most == everything), -(held + most))
                if best_case < last[:2]:
                    needed[held] = 0
                elif best_case == last[:2]:
                    needed[held] = -last[2] - rest_bound
            kept = list(map(ge, frequency, map(needed.__getitem__, matched)))
            if not all(kept):
                dismissed.update(compress(part, map(not_, kept)))
                part = list(compress(part, kept))
                matched = list(compress(matched, kept))
                frequency = list(compress(frequency, kept))
                if not part:
                    return
        exact = list(map(eq, matched, repeat(everything)))
        keys = zip(map(neg, exact), map(neg, matched), map(neg, frequency), part, strict=True)
        scored.update(zip(part, keys, strict=True))
        if phrase:
            unsettled.update(compress(part, exact))

    def top(limit: int) -> list[tuple[int, int, int, int]]:
        """The LIMIT best scored, after checking the phrase in those of them not checked
        yet (a check can only lower a rank)."""
        heap = list(scored.values())
        heapq.heapify(heap)
        found = []
        while heap and len(found) < limit:
            key = heapq.heappop(heap)
            if key[3] in unsettled:
                unsettled.discard(key[3])
                ranked = rank(query_tokens, index.words(key[3], blocks))
                if ranked is None or (-ranked[1], -ranked[2]) != key[1:3]:
                    raise CorruptIndex("the postings disagree with the passage's tokens")
                if not ranked[0]:
                    scored[key[3]] = key = (0, *key[1:])
                    heapq.heappush(heap, key)
                    continue
            found.append(key)
        return found

    reading, size = terms, chunk
    while reading:
        parts: list[tuple[Term, int, memoryview]] = []  # (term, count, passages) read
        for term in reading:
            at, stop = position[term], min(position[term] + size, term.end)
            number = group[term]
            while at < stop:
                count, group_stop = term.groups[number]
                upto = min(group_stop, stop)
                parts.append((term, count, postings[at:upto]))
                if upto == group_stop:
                    number += 1
                at = upto
            position[term], group[term] = stop, number
            bound[term] = 0 if stop == term.end else term.groups[number][0]
        # A passage read for two terms or more this round is ranked one by one; the others
        # (most of them) a part at a time, in C where it can be.
        shared: set[int] = set()
        if len(reading) > 1:
            read = {term: set() for term in reading}
            for term, _, part in parts:
                read[term].update(part)
            sets = list(read.values())
            for number, one in enumerate(sets):
                for other in sets[number + 1 :]:
                    shared |= one & other
            shared.difference_update(scored)
            shared.difference_update(dismissed)
        fresh = []
        if shared:
            met: dict[int, dict[Term, int]] = {passage: {} for passage in shared}
            for term, count, part in parts:
                for passage in shared.intersection(part):
                    met[passage][term] = count
            for passage, known in met.items():
                # What it holds of a term read this round is known; of any other term, at
                # most that term's bound (it was not among the postings read above it).
                others = [bound[term] for term in terms if term not in known and bound[term]]
                matched = len(known) + len(others)
                most = (-int(matched == len(unique)), -matched, -sum(known.values()) - sum(others))
                if most > last:
                    dismissed.add(passage)
                else:
                    fresh.append((passage, known))
        for term, count, part in parts:
            unseen = filterfalse(dismissed.__contains__, filterfalse(scored.__contains__, part))
            alone = list(filterfalse(shared.__contains__, unseen) if shared else unseen)
            if not alone:
                continue
            # Each holds COUNT of TERM and, of every other term, at most its bound.
            others = [bound[other] for other in terms if other is not term and bound[other]]
            matched = 1 + len(others)
            most = (-int(matched == len(unique)), -matched, -count - sum(others))
            if most > last:
                dismissed.update(alone)
            else:
                score_part(term, count, alone)
        score(fresh)
        present = [count for count in bound.values() if count]
        if not present:
            break
        unmet = (-int(len(present) == len(unique)), -len(present), -sum(present))
        chunk = min(chunk * 2, LAST_CHUNK)
        reading, size = [term for term in terms if bound[term]], chunk
        if len(scored) >= limit:
            last = top(limit)[-1][:3]
            if last < unmet:
                break
            if last == unmet and (not unmet[0] or not phrase):
                # A passage not met yet can at best tie with the LIMIT-th, and does exactly
                # when it holds each term not used up as often as that term's bound (it
                # cannot be exact: a term is used up, or the query is one token, which all
                # of them hold). Path and line decide ties, so of those passages only the
                # first LIMIT in that order (passage number) can enter.
                tied: set[int] | None = None
                for term in reading:
                    count, group_stop = term.groups[group[term]]
                    rest = (
                        set(postings[position[term] : group_stop])
                        if count == bound[term]
                        else set()
                    )
                    tied = rest if tied is None else tied & rest
                assert tied is not None
                tied.difference_update(scored)
                tied.difference_update(dismissed)
                score((passage, {}) for passage in heapq.nsmallest(limit, tied))
                break
            if last[:2] > unmet[:2]:
                # Only using up a term can lower the bound enough: read the shortest to its
                # end.
                left, _, term = min(
                    (term.end - position[term], number, term) for number, term in enumerate(reading)
                )
                reading, size = [term], min(left, LAST_CHUNK)
    found = [index.passage(key[3], blocks) for key in top(limit)]
    index.keep(blocks, terms)
    return found


def candidates(
    source: Any, query_tokens: list[str], limit: int
) -> list[tuple[str, int, int, str, str]] | None:
    """The passages of SOURCE's files that are among the LIMIT best for QUERY_TOKENS, as
    (path, start, end, text, words); None when the index cannot be used (the caller scans).

    A Git tree is known by its id: an index that holds that tree answers at once, without
    listing it. Otherwise the files are listed (a `stat` each on disk) and compared, as one
    digest, with the listing the index holds; an index that differs is brought up to date
    first (`update`). The base and its overlay each give their LIMIT best (the base
    passing over the passages the overlay replaces), and the caller orders the union.
    Each query reads the files it opened, so a concurrent rewrite cannot mix in.
    """
    tree = getattr(source, "tree", None)
    path = index_file(source)
    if not os.path.isdir(path.parent):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            return None

    def answer(base: Index, overlay: Index | None) -> list[tuple[str, int, int, str, str]]:
        if overlay is None:
            return best(base, query_tokens, limit)
        found = best(base, query_tokens, limit, overlay.removed_passages(base))
        if overlay.documents:
            found += best(overlay, query_tokens, limit)
        return found

    for attempt in range(2):
        try:
            base, overlay, found = _current(source, tree, path, not attempt, answer)
            return found if found is not None else answer(base, overlay)
        except (CorruptIndex, ValueError, IndexError, KeyError, zlib.error, UnicodeError):
            # Checked data that does not add up: rebuild from the corpus, once.
            for damaged in (path, overlay_file(path)):
                _forget(damaged)
                try:
                    damaged.unlink()
                except OSError:
                    pass
        except Unwritable:
            return None
    return None


def overlay_file(path: Path) -> Path:
    """Where the overlay of the index at PATH lives."""
    return path.with_suffix(".overlay")


def _current(
    source: Any, tree: str | None, path: Path, trusted: bool, answer: Any
) -> tuple[Index, Index | None, Any]:
    """The index of SOURCE as it is now: its base and, if any, the overlay on it, and
    what ANSWER gave for them when it could be asked while a directory's files were
    statted (else None). Only an overlay written for that very base (its generation)
    counts. Unless TRUSTED, what is on disk is not reused."""
    base = open_index(path) if trusted else None
    overlay = open_index(overlay_file(path)) if base is not None else None
    if overlay is not None and overlay.base != base.generation:
        overlay = None
    held = overlay or base
    if held is not None and tree is not None and held.tree == tree:
        return base, overlay, None
    found = None
    if held is not None and hasattr(source, "listing_beside"):
        # The query runs while the files are statted: its answer stands if the listing
        # shows that nothing changed (the index holds exactly these files).
        def ahead() -> Any:
            try:
                return answer(base, overlay)
            except (CorruptIndex, ValueError, IndexError, KeyError, zlib.error, UnicodeError):
                return None  # asked again below, where a failure is handled

        listing, files, found = source.listing_beside(ahead)
    else:
        listing, files = source.listing()
    if held is None or held.listing != listing:
        return (*update(source, files(), listing, tree, base, overlay, path), None)
    if tree is not None and held.tree != tree:
        # The same files under another tree's id: only the (small) overlay records it.
        if overlay is not None:
            overlay = retag(overlay, overlay_file(path), tree)
        else:
            overlay = build(source, [], listing, tree, None, overlay_file(path), (base, []))
        return base, overlay, None
    return base, overlay, found


def update(
    source: Any,
    files: list[CorpusFile],
    listing: str,
    tree: str | None,
    base: Index | None,
    overlay: Index | None,
    path: Path,
) -> tuple[Index, Index | None]:
    """Bring the index at PATH (BASE, OVERLAY) to FILES. The files that BASE does not hold
    as they are now go into a new overlay, with the base's documents they replace or that
    are gone, so an edit reads and indexes one file and writes a small one. When that
    overlay would hold more than 1/OVERLAY_SHARE of the base's files, a new base is
    written instead (from the old one: only the files it lacks are read)."""
    if base is not None:
        paths, identities = base.listing_of("paths"), base.listing_of("identities")
        now = {file.path: file.identity for file in files}
        removed = [
            number
            for number, (held, identity) in enumerate(zip(paths, identities, strict=True))
            if now.get(held) != identity
        ]
        held_identity = dict(zip(paths, identities, strict=True))
        added = [file for file in files if held_identity.get(file.path) != file.identity]
        if (len(added) + len(removed)) * OVERLAY_SHARE <= base.documents:
            written = build(
                source, added, listing, tree, overlay, overlay_file(path), (base, removed)
            )
            return base, written
    written = build(source, files, listing, tree, base, path)
    _forget(overlay_file(path))
    try:
        overlay_file(path).unlink()
    except OSError:
        pass
    return written, None
