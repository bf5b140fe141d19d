"""An on-disk passage index for Markdown corpora (SQLite, standard library only).

The index finds the passages that can be among a query's best without reading the corpus,
and `corpus.py` scores and orders them with the same function a full scan uses, so indexed
and unindexed search give the same hits. A warm query lists the corpus (a `stat` per file
on disk) and reads nothing else but the index; a Git tree is known by its id, so a warm
query of a tree the index holds lists nothing at all.

Files are indexed by identity: size, mtime in nanoseconds and inode on disk; the blob id in
Git. A file whose identity changed is re-read, a file that went away is dropped, the rest
is left alone. A digest of the whole listing is kept too, so a warm query that finds it
unchanged compares one string instead of every file's row.

Each passage's tokens are stored once as text and once as postings `(term id, count,
passage)`, ordered by count within a term. A query walks the postings of its terms from the
highest count down (the threshold algorithm) and scores the passages it meets with
`corpus.rank`; it stops as soon as the passage in `limit`-th place beats anything a passage
not met yet could score, or ties with it in a way that only path and line can decide.

Where it lives: for a Git tree, `<common git dir>/obversa/corpus/`; for a directory,
`$XDG_CACHE_HOME/git-obversa/corpus/` (default `~/.cache`). One database per corpus,
safe to delete at any time. If the index cannot be opened or written, search falls back to
a full scan.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import os
import sqlite3
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

from git_obversa.corpus.passages import CorpusFile, passages, rank, tokens

SCHEMA_VERSION = 3
SCHEMA = """
CREATE TABLE documents (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    identity TEXT NOT NULL
);
CREATE TABLE passages (
    id INTEGER PRIMARY KEY,
    document INTEGER NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    text TEXT NOT NULL,
    words TEXT NOT NULL
);
CREATE INDEX passages_by_document ON passages(document);
CREATE TABLE terms (id INTEGER PRIMARY KEY, term TEXT NOT NULL UNIQUE);
CREATE TABLE postings (
    term INTEGER NOT NULL,
    count INTEGER NOT NULL,
    passage INTEGER NOT NULL,
    PRIMARY KEY (term, count, passage)
) WITHOUT ROWID;
CREATE TABLE state (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
OLD_TABLES = ("terms", "postings", "passages", "documents", "state")
# Postings read per term per round: the first round is cheap for a rare term, and the
# chunk doubles so that a long walk down a common term takes few round trips.
FIRST_CHUNK, LAST_CHUNK = 64, 8192
MANY = 1 << 62  # more than any count or number of postings


def cache_home() -> Path:
    configured = os.environ.get("XDG_CACHE_HOME")
    return Path(configured) if configured else Path.home() / ".cache"


def index_file(source: Any) -> Path:
    """Where SOURCE's index lives: beside the repository for a Git tree, else in the cache."""
    common_dir = getattr(source, "common_dir", None)
    if common_dir is not None:
        base, name = Path(common_dir) / "obversa" / "corpus", f"git:{source.directory}"
    else:
        base, name = cache_home() / "git-obversa" / "corpus", os.path.realpath(source.directory)
    return base / (
        hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:32] + ".sqlite"
    )


def connect(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path, timeout=60, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    connection.execute("PRAGMA cache_size=-32768")  # 32 MB (default 2): a first build is large
    if connection.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
        connection.execute("BEGIN IMMEDIATE")
        if connection.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            for table in OLD_TABLES:
                connection.execute(f"DROP TABLE IF EXISTS {table}")
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    connection.execute(statement)
            connection.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        connection.execute("COMMIT")
    return connection


def listing_digest(files: list[CorpusFile]) -> str:
    """What the index must hold for FILES: one digest of every (path, identity)."""
    listing = "\n".join(f"{file.path}\0{file.identity}" for file in files)
    return hashlib.sha256(listing.encode("utf-8", "surrogateescape")).hexdigest()


def _stored(connection: sqlite3.Connection, name: str) -> str | None:
    """A value of the state table: 'listing' (the digest of the files the index holds)
    or 'tree' (the Git tree id they came from)."""
    row = connection.execute("SELECT value FROM state WHERE name = ?", (name,)).fetchone()
    return row[0] if row else None


def _stale(
    connection: sqlite3.Connection, files: list[CorpusFile]
) -> tuple[list[int], list[CorpusFile]]:
    """(documents to drop, files to (re)index) for the listing FILES."""
    stored = {
        path: (id_, identity)
        for id_, path, identity in connection.execute("SELECT id, path, identity FROM documents")
    }
    wanted = {file.path: file for file in files}
    drop = [
        id_
        for path, (id_, identity) in stored.items()
        if path not in wanted or wanted[path].identity != identity
    ]
    add = [
        file
        for path, file in wanted.items()
        if path not in stored or stored[path][1] != file.identity
    ]
    return drop, add


def _update(
    connection: sqlite3.Connection, source: Any, files: list[CorpusFile], digest: str
) -> None:
    """Inside a write transaction: make the index hold exactly FILES, reading only the files
    that are new or changed."""
    drop, add = _stale(connection, files)
    for document in drop:
        rows = connection.execute(
            "SELECT id, words FROM passages WHERE document = ?", (document,)
        ).fetchall()
        connection.executemany(
            "DELETE FROM postings WHERE term = ? AND count = ? AND passage = ?",
            _postings(connection, [(id_, Counter(words.split(" "))) for id_, words in rows]),
        )
        connection.execute("DELETE FROM passages WHERE document = ?", (document,))
        connection.execute("DELETE FROM documents WHERE id = ?", (document,))
    for start in range(0, len(add), 256):  # bounded memory on a first build
        batch = add[start : start + 256]
        counted = []
        for file, text in zip(batch, source.read(batch), strict=True):
            counted += _insert(connection, file, text)
        connection.executemany(
            "INSERT INTO postings VALUES(?, ?, ?)", _postings(connection, counted)
        )
    connection.execute("INSERT OR REPLACE INTO state VALUES('listing', ?)", (digest,))


def _postings(
    connection: sqlite3.Connection, counted: list[tuple[int, Counter[str]]]
) -> list[tuple[int, int, int]]:
    """(term id, count, passage) for every (passage, term counts) of COUNTED, giving the
    terms the index has not seen yet an id."""
    terms = json.dumps(list({term for _, counts in counted for term in counts}), ensure_ascii=False)
    connection.execute("INSERT OR IGNORE INTO terms(term) SELECT value FROM json_each(?)", (terms,))
    ids = dict(
        connection.execute(
            "SELECT term, id FROM terms WHERE term IN (SELECT value FROM json_each(?))", (terms,)
        )
    )
    return [
        (ids[term], count, passage) for passage, counts in counted for term, count in counts.items()
    ]


def _insert(
    connection: sqlite3.Connection, file: CorpusFile, text: str
) -> list[tuple[int, Counter[str]]]:
    """Store FILE's passages; return their term counts for the caller to store at once."""
    document = connection.execute(
        "INSERT INTO documents(path, identity) VALUES(?, ?)", (file.path, file.identity)
    ).lastrowid
    counted = []
    for start_line, end_line, passage in passages(text):
        words = " ".join(tokens(passage))
        if not words:
            continue  # a passage without a token can never be a hit
        passage_id = connection.execute(
            "INSERT INTO passages(document, start_line, end_line, text, words)"
            " VALUES(?, ?, ?, ?, ?)",
            (document, start_line, end_line, passage, words),
        ).lastrowid
        counted.append((passage_id, Counter(words.split(" "))))
    return counted


def best(
    connection: sqlite3.Connection, query_tokens: list[str], limit: int
) -> list[tuple[str, int, int, str, str]]:
    """The LIMIT best passages for QUERY_TOKENS as (path, start, end, text, words), found
    with the threshold algorithm over each term's postings, highest count first.

    A passage's rank is (exact, matched terms, frequency), then path and line. After a
    term's postings were read down to count c, a passage not met yet holds that term at
    most c times, and not at all once the term's postings are used up. So it can match at
    most the terms not used up, count at most the sum of their c, and be exact only if no
    term is used up. Once the passage in LIMIT-th place ranks strictly above that bound,
    no passage not met yet can enter the LIMIT best. A passage met whose own bound (what
    was read of it, and the terms' bounds for the rest) is already below the LIMIT-th is
    never scored.
    """
    unique = list(dict.fromkeys(query_tokens))
    ids = connection.execute(
        "SELECT id FROM terms WHERE term IN (SELECT value FROM json_each(?))",
        (json.dumps(unique, ensure_ascii=False),),
    )
    terms = [id_ for (id_,) in ids]  # a term the index never saw holds no passage
    after = dict.fromkeys(terms, (MANY, 0))  # (count, passage) last read, per term
    bound = dict.fromkeys(terms, MANY)
    scored: dict[int, tuple[tuple[int, int, int, str, int], int]] = {}
    dismissed: set[int] = set()  # met, but could not rank above the LIMIT-th when met
    last = (1, 1, 1)  # the rank (negated) of the LIMIT-th passage so far: none yet
    chunk = FIRST_CHUNK

    def score(ids: str, narrow: str, *parameters: Any) -> None:
        """Score the passages listed in IDS (a JSON list), or, with NARROW, those it selects
        among the passages not listed."""
        for id_, path, start, words in connection.execute(
            "SELECT p.id, d.path, p.start_line, p.words FROM passages p"
            " JOIN documents d ON d.id = p.document"
            f" WHERE p.id {'NOT IN' if narrow else 'IN'} (SELECT value FROM json_each(?))" + narrow,
            (ids, *parameters),
        ):
            exact, matched, frequency = rank(query_tokens, words)
            scored[id_] = ((-exact, -matched, -frequency, path, start), id_)

    def unread(term: int) -> int:
        """How many of TERM's postings are left to read, counted up to a chunk."""
        return connection.execute(
            "SELECT count(*) FROM (SELECT 1 FROM postings WHERE term = ?"
            " AND (count, passage) < (?, ?) LIMIT ?)",
            (term, *after[term], LAST_CHUNK),
        ).fetchone()[0]

    reading, size = terms, chunk
    while reading:
        met: dict[int, dict[int, int]] = {}  # passage -> {term: count} read this round
        for term in reading:
            rows = connection.execute(
                "SELECT count, passage FROM postings WHERE term = ? AND (count, passage) < (?, ?)"
                " ORDER BY count DESC, passage DESC LIMIT ?",
                (term, *after[term], size),
            ).fetchall()
            for count, passage in rows:
                met.setdefault(passage, {})[term] = count
            if len(rows) < size:
                bound[term] = 0
            else:
                after[term] = rows[-1]
                bound[term] = rows[-1][0]
        fresh = []
        for passage, known in met.items():
            if passage in scored or passage in dismissed:
                continue
            # What it holds of a term read this round is known; of any other term, at most
            # that term's bound (it was not among the postings read above the bound).
            others = [bound[term] for term in terms if term not in known and bound[term]]
            matched = len(known) + len(others)
            most = (-int(matched == len(unique)), -matched, -sum(known.values()) - sum(others))
            if most > last:
                dismissed.add(passage)
            else:
                fresh.append(passage)
        score(json.dumps(fresh), "")
        present = [count for count in bound.values() if count]
        if not present:
            break
        unmet = (-int(len(present) == len(unique)), -len(present), -sum(present))
        chunk = min(chunk * 2, LAST_CHUNK)
        reading, size = [term for term in terms if bound[term]], chunk
        if len(scored) >= limit:
            last = heapq.nsmallest(limit, scored.values())[-1][0][:3]
            if last < unmet:
                break
            if last == unmet and (not unmet[0] or len(query_tokens) == 1):
                # A passage not met yet can at best tie with the LIMIT-th, and does exactly
                # when it holds each term not used up as often as that term's bound (it
                # cannot be exact: a term is used up, or the query is one token, which all
                # of them hold). Path and line decide ties, so of those passages only the
                # first LIMIT in that order can enter.
                tied = " INTERSECT ".join(
                    "SELECT passage FROM postings WHERE term = ? AND count = ? AND passage < ?"
                    for term in reading
                )
                score(
                    json.dumps([*scored, *dismissed]),
                    f" AND p.id IN ({tied}) ORDER BY d.path, p.start_line LIMIT ?",
                    *(value for term in reading for value in (term, *after[term])),
                    limit,
                )
                break
            if last[:2] > unmet[:2]:
                # Only using up a term can lower the bound enough: read the shortest to its
                # end (one row more than is left, so that it is seen to be used up).
                shortest = min((unread(term), term) for term in reading)
                reading, size = [shortest[1]], min(shortest[0] + 1, LAST_CHUNK)
    winners = [id_ for _, id_ in heapq.nsmallest(limit, scored.values())]
    return connection.execute(
        "SELECT d.path, p.start_line, p.end_line, p.text, p.words FROM passages p"
        " JOIN documents d ON d.id = p.document"
        " WHERE p.id IN (SELECT value FROM json_each(?))",
        (json.dumps(winners),),
    ).fetchall()


def candidates(
    source: Any, query_tokens: list[str], limit: int
) -> list[tuple[str, int, int, str, str]] | None:
    """The passages of SOURCE's files that are among the LIMIT best for QUERY_TOKENS, as
    (path, start, end, text, words); None when the index cannot be used (the caller scans).

    A Git tree is known by its id: an index that holds that tree answers at once, without
    listing it. Otherwise the files are listed (a `stat` each on disk) and the index is
    brought up to date and queried in one transaction, so a concurrent update of the same
    index (another process, another revision) cannot mix in.
    """
    tree = getattr(source, "tree", None)
    try:
        connection = connect(index_file(source))
    except (OSError, sqlite3.Error):
        return None
    with closing(connection):
        try:
            connection.execute("BEGIN")
            if tree is None or _stored(connection, "tree") != tree:
                files = source.files()
                digest = listing_digest(files)
                if _stored(connection, "listing") != digest or tree is not None:
                    connection.execute("ROLLBACK")
                    connection.execute("BEGIN IMMEDIATE")
                    if _stored(connection, "listing") != digest:
                        _update(connection, source, files, digest)
                    if tree is None:
                        connection.execute("DELETE FROM state WHERE name = 'tree'")
                    else:
                        connection.execute(
                            "INSERT OR REPLACE INTO state VALUES('tree', ?)", (tree,)
                        )
            found = best(connection, query_tokens, limit)
            connection.execute("COMMIT")
            return found
        except sqlite3.Error:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            return None
