"""An on-disk passage index for Markdown corpora: one memory-mapped file, standard library only.

The index finds the passages that can be among a query's best without reading the corpus,
and `markdown.py` scores and orders them with the same function a full scan uses, so indexed
and unindexed search give the same hits. A warm query lists the corpus (a `stat` per file
on disk) and reads nothing else but the index; a Git tree is known by its id, so a warm
query of a tree the index holds lists nothing at all.

- `format.py`: the file, checked when opened, and how it is written; where it lives.
- `build.py`: building it from the corpus, and an overlay of what changed since.
- `query.py`: a query's walk down its terms' postings (the threshold algorithm).
- here: `candidates`, what a search asks of the index, bringing it up to date first.

Anything that does not check out is rebuilt from the corpus. A change to the corpus reads
only the files whose identity changed, into an overlay that names the base's files it
replaces and the generation of that base; queries merge the two. If the index cannot be
written, search falls back to a full scan.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path
from typing import Any

from git_obversa.corpus.index.format import (
    CorruptIndex,
    Index,
    Unwritable,
    forget,
    index_file,
    open_index,
    overlay_file,
)
from git_obversa.corpus.index.query import best

__all__ = ["best", "candidates", "index_file", "open_index", "overlay_file"]


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
                forget(damaged)
                try:
                    damaged.unlink()
                except OSError:
                    pass
        except Unwritable:
            return None
    return None


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
        # Imported here: a query of an index that is up to date builds nothing.
        from git_obversa.corpus.index import build

        return (*build.update(source, files(), listing, tree, base, overlay, path), None)
    if tree is not None and held.tree != tree:
        from git_obversa.corpus.index import build

        return base, build.retagged(source, listing, tree, base, overlay, path), None
    return base, overlay, found
