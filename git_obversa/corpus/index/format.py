"""The corpus index's file: its format, checked when opened, and how it is written.

The file (`<name>.index`) holds, after a small header:

- per document (sorted by path): its path, its identity (size, mtime in ns and inode on
  disk; the blob id in Git), its first passage number, and one zlib block with its
  passages' lines and byte lengths (32-bit numbers), then their texts;
- per term (sorted): its passages, grouped by how often the term occurs in them, highest
  count first, as one array of 32-bit passage numbers; a CRC-32 per term covers them.

Passages are numbered in (path, line) order, so the order in which ties are broken is the
order of the numbers.

The file is written whole to a temporary file and renamed over the old one, so readers
(which map the file they opened) never see a partial index, and it is never changed in
place. It is checked before it is used: magic, version, byte order, a CRC-32 of every table
when it is opened, and of a term's postings when a query first reads them; the zlib
blocks carry their own checksum. An overlay (`<name>.overlay`) has the same format and
also names the base's files it replaces and the generation of that base.

Where it lives: for a Git tree, `<common git dir>/obversa/corpus/`; for a directory,
`$XDG_CACHE_HOME/git-obversa/corpus/` (default `~/.cache`). One file per corpus (and its
overlay), about the size of the corpus or less, safe to delete at any time.
"""

from __future__ import annotations

import hashlib
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
from itertools import accumulate, compress, filterfalse, repeat
from operator import eq
from pathlib import Path
from typing import Any

from git_obversa.corpus.passages import tokens

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
DECOMPRESS_STEP = 4096  # bytes decompressed at a time while looking for one passage
TABLE_AFTER = 64  # a term asked about 1/64 of its passages answers from a table
# Counting a term in passages: a count group at most this many times their number long is
# intersected with them as a set, a longer one bisected per passage.
INTERSECT_BELOW = 16
STALE_TEMPORARY = 3600  # seconds after which a writer's leftover temporary file is removed
KEPT_OPEN = 8  # indexes kept mapped by one process
# What a long-lived process (a server, a kept corpus) keeps of an index between queries,
# per index: the terms last queried with the sets and tables their counting built (at
# most KEPT_TERMS, holding at most KEPT_MEMBERS passage numbers in all), and the text of
# the documents last read (at most KEPT_TEXT bytes).
KEPT_TERMS, KEPT_MEMBERS, KEPT_TEXT = 256, 1 << 17, 1 << 21


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
        intersection (the group's set is kept for the next call) when the group is
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
                # Bisect the group for every passage at once, then keep those found.
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
        about more passages than a 64th of its postings, from a table of them all (a
        passage met in what was read is never asked about, so the table may
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


def forget(path: Path) -> None:
    index = _open_indexes.pop(str(path), None)
    if index is not None:
        try:
            index.close()
        except BufferError:  # a view still in use somewhere; the mapping goes with it
            pass


def _keep(path: Path, index: Index) -> Index:
    forget(path)
    while len(_open_indexes) >= KEPT_OPEN:
        forget(Path(next(iter(_open_indexes))))
    _open_indexes[str(path)] = index
    return index


def open_index(path: Path) -> Index | None:
    """The index at PATH, checked; None when there is none or it does not check out (the
    caller rebuilds it). A file this process already checked is reused while it is the
    same file (device, inode, size, mtime)."""
    try:
        info = os.stat(path)
    except OSError:
        forget(path)
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
        forget(path)
        return None
    finally:
        os.close(descriptor)


def write_index(path: Path, meta: dict, sections: dict[str, Any], blocks: list[bytes]) -> Index:
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


def overlay_file(path: Path) -> Path:
    """Where the overlay of the index at PATH lives."""
    return path.with_suffix(".overlay")
