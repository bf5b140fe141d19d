"""Building the corpus index: a base from the corpus, or an overlay of what changed.

A build reads only the files whose identity the previous index does not hold; the others
keep their compressed block and their postings, renumbered. An update writes the files
that changed into an overlay of the base, and a new base once that overlay would hold
more than 1/OVERLAY_SHARE of the base's files.
"""

from __future__ import annotations

import secrets
import sys
import zlib
from array import array
from bisect import bisect_left
from collections import Counter, defaultdict, deque
from functools import partial
from itertools import chain, islice, repeat
from operator import is_not, lt
from pathlib import Path
from typing import Any

from git_obversa.corpus.index.format import Index, forget, overlay_file, retag, write_index
from git_obversa.corpus.passages import CorpusFile, passages, tokens

FILES_PER_READ = 256  # files read from the source at a time while building
COMPRESSION = 1  # zlib level of the documents' blocks: the fastest, as a build is waited for
KEPT = partial(is_not, None)
# Renumbering a group of postings after an update: by runs of unchanged files (bisect and
# copy) when it is long and the runs few, else number by number.
SHORT_GROUP, MANY_RUNS = 32, 16
ONE = (1).to_bytes(4, sys.byteorder)  # passage number 1 as a postings table holds it
# An overlay holds the files changed since its base was written; one that would hold more
# than 1/OVERLAY_SHARE of the base's files is merged into a new base instead.
OVERLAY_SHARE = 32


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
    documents = _Documents(previous)
    documents.add_all(source, files)
    sections = documents.sections(files)
    sections.update(_term_sections(documents))
    meta = {
        "listing": listing,
        "tree": tree,
        "documents": len(files),
        "passages": documents.passage,
        "terms": len(sections["term_ends"]) - 1,
        "byteorder": sys.byteorder,
    }
    if base is None:
        meta["generation"] = secrets.token_hex(8)
    else:
        meta.update(base=base[0].generation, removed=base[1])
    return write_index(path, meta, sections, documents.blocks)


class _Documents:
    """The documents' side of a build: their blocks and first passages, the occurrences of
    each term in the files read, and where the previous index's passages went."""

    def __init__(self, previous: Index | None) -> None:
        self.previous = previous
        self.reusable: dict[str, tuple[str, int]] = {}
        if previous is not None:
            paths, identities = previous.listing_of("paths"), previous.listing_of("identities")
            self.reusable = {
                path: (identities[number], number) for number, path in enumerate(paths)
            }
        # The new number of each passage of PREVIOUS (None: its file changed or went away).
        self.renumbered: list[int | None] = [None] * (previous.passages if previous else 0)
        # The same as runs [old first, old end, shift] of unchanged files: few after a few
        # edits.
        self.shifts: list[list[int]] = []
        # term -> the number of each passage it occurs in, once per occurrence, in order.
        self.occurrences: defaultdict[str, list[int]] = defaultdict(list)
        self.first_passage, self.block_ends = array("I", [0]), array("Q", [0])
        self.block_crcs = array("I")
        self.blocks: list[bytes] = []
        self.passage = self.size = 0

    def add_all(self, source: Any, files: list[CorpusFile]) -> None:
        """Add FILES in order, reading those PREVIOUS does not hold as they are a batch at
        a time."""
        for begin in range(0, len(files), FILES_PER_READ):
            batch = files[begin : begin + FILES_PER_READ]
            fresh = [
                file for file in batch if self.reusable.get(file.path, ("",))[0] != file.identity
            ]
            read = source.read(fresh) if fresh else []
            texts = dict(zip([file.path for file in fresh], read, strict=True))
            for file in batch:
                if file.path in texts:
                    block, count = self._read(texts[file.path])
                else:
                    block, count = self._reused(self.reusable[file.path][1])
                self.passage += count
                self.first_passage.append(self.passage)
                self.blocks.append(block)
                self.block_crcs.append(zlib.crc32(block))
                self.size += len(block)
                self.block_ends.append(self.size)

    def _read(self, text: str) -> tuple[bytes, int]:
        """The block of a document read anew, and its number of passages; its terms'
        occurrences are recorded."""
        token_lists, found = _document_passages(text)
        encoded = [passage.encode("utf-8", "surrogateescape") for _, _, passage in found]
        header = array("I", [len(found)])
        for (start, end, _), data in zip(found, encoded, strict=True):
            header.extend((start, end, len(data)))
        block = zlib.compress(header.tobytes() + b"".join(encoded), COMPRESSION)
        # Each occurrence appends its passage number to its term's list: a term holds a
        # passage as many times as it occurs there, in passage order.
        holding, append = self.occurrences.__getitem__, list.append
        lengths = map(len, token_lists)
        numbers = map(repeat, range(self.passage, self.passage + len(token_lists)), lengths)
        deque(
            map(
                append,
                map(holding, chain.from_iterable(token_lists)),
                chain.from_iterable(numbers),
            ),
            0,
        )
        return block, len(token_lists)

    def _reused(self, number: int) -> tuple[bytes, int]:
        """The block of the previous index's NUMBER-th document, unchanged, and its number
        of passages; where its passages go is recorded."""
        previous, passage = self.previous, self.passage
        assert previous is not None
        ends, firsts = previous.block_ends, previous.first_passage
        block = previous.sections["blocks"][0][ends[number] : ends[number + 1]].tobytes()
        count = firsts[number + 1] - firsts[number]
        self.renumbered[firsts[number] : firsts[number + 1]] = range(passage, passage + count)
        shift, shifts = passage - firsts[number], self.shifts
        if shifts and shifts[-1][1] == firsts[number] and shifts[-1][2] == shift:
            shifts[-1][1] = firsts[number + 1]
        else:
            shifts.append([firsts[number], firsts[number + 1], shift])
        return block, count

    def groups(self, term: str, old_number: int | None) -> dict[int, Any]:
        """TERM's passages by how often it occurs in them, each group in passage order:
        those of the previous index's postings (OLD_NUMBER) renumbered, and those read."""
        groups: dict[int, Any] = {}
        previous = self.previous
        if old_number is not None:
            assert previous is not None
            # Unchanged files keep their order, so each group stays in passage order.
            old = previous.term_at(old_number)
            low = old.start
            for count, stop in old.groups:
                moved = _renumber(previous.postings, low, stop, self.renumbered, self.shifts)
                if moved:
                    groups[count] = moved
                low = stop
        held = self.occurrences.pop(term, None)
        if held:
            for count, numbers in _grouped(held).items():
                if count in groups:
                    groups[count] = sorted(chain(groups[count], numbers))
                else:
                    groups[count] = numbers
        return groups

    def sections(self, files: list[CorpusFile]) -> dict[str, Any]:
        """The documents' tables."""
        return {
            "paths": "\n".join(file.path for file in files).encode("utf-8", "surrogateescape"),
            "identities": "\n".join(file.identity for file in files).encode(
                "utf-8", "surrogateescape"
            ),
            "first_passage": self.first_passage,
            "block_ends": self.block_ends,
            "block_crcs": self.block_crcs,
        }


def _document_passages(text: str) -> tuple[list[list[str]], list[tuple[int, int, str]]]:
    """The token lists and (start, end, text) of TEXT's passages that hold a token."""
    found_tokens, found = [], []
    for start, end, passage in passages(text):
        passage_tokens = tokens(passage)
        if passage_tokens:  # a passage without a token can never be a hit
            found_tokens.append(passage_tokens)
            found.append((start, end, passage))
    return found_tokens, found


def _grouped(held: list[int]) -> dict[int, list[int]]:
    """HELD, a term's occurrences (passage numbers in order, once per occurrence), as its
    passages by count, highest count first, each group in passage order."""
    # Strictly increasing means each passage once.
    if all(map(lt, held, islice(held, 1, None))):
        return {1: held}
    counts = Counter(held)  # passage -> occurrences
    # Highest count first; the sort is stable, so each group stays in order.
    ordered = sorted(counts, key=counts.__getitem__, reverse=True)
    sizes = Counter(counts.values())  # count -> passages holding it so often
    added, at = {}, 0
    for count in sorted(sizes, reverse=True):
        added[count] = ordered[at : at + sizes[count]]
        at += sizes[count]
    return added


def _term_sections(documents: _Documents) -> dict[str, Any]:
    """The terms' tables: every term of the previous index or of the files read that some
    passage still holds, in order, with its postings grouped by count."""
    previous = documents.previous
    old_terms = previous.term_list() if previous is not None else []
    old_number = {term: number for number, term in enumerate(old_terms)}
    terms = sorted(old_number.keys() | documents.occurrences.keys())
    term_text = bytearray()
    term_ends, posting_ends, group_ends = array("I", [0]), array("I", [0]), array("I", [0])
    group_counts, group_stops, term_crcs, postings = array("I"), array("I"), array("I"), array("I")
    for term in terms:
        groups = documents.groups(term, old_number.get(term))
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
    return {
        "terms": term_text,
        "term_ends": term_ends,
        "posting_ends": posting_ends,
        "group_ends": group_ends,
        "group_counts": group_counts,
        "group_stops": group_stops,
        "term_crcs": term_crcs,
        "postings": postings,
    }


def _renumber(
    postings: memoryview, low: int, stop: int, renumbered: list, shifts: list[list[int]]
) -> Any:
    """The new numbers of the passages in POSTINGS[LOW:STOP] (ascending) whose files are
    unchanged, in the same order. With few runs of unchanged files, each run is found by
    bisection and copied (shift 0) or shifted whole; otherwise each number is looked up."""
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
    """RUN (native 32-bit passage numbers) with SHIFT added to each, all at once: read as one
    big integer whose digits are the numbers, every digit gains SHIFT at once. No number
    leaves 0..2**32-1 (each is a passage number before and after), so nothing carries
    from one digit into the next."""
    ones = int.from_bytes(ONE * (len(run) // 4), sys.byteorder)
    total = int.from_bytes(run, sys.byteorder) + shift * ones
    return total.to_bytes(len(run), sys.byteorder)


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
    forget(overlay_file(path))
    try:
        overlay_file(path).unlink()
    except OSError:
        pass
    return written, None


def retagged(
    source: Any, listing: str, tree: str | None, base: Index, overlay: Index | None, path: Path
) -> Index:
    """The overlay of the index at PATH recording TREE, a tree with the same files as the
    one BASE (and OVERLAY) hold: only the (small) overlay records it."""
    if overlay is not None:
        return retag(overlay, overlay_file(path), tree)
    return build(source, [], listing, tree, None, overlay_file(path), (base, []))
