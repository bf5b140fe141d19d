"""An on-disk passage index for Markdown corpora (SQLite FTS5, standard library only).

The index only narrows: it returns every passage that holds at least one query term, and
`corpus.py` scores those with the same function a full scan uses, so indexed and
unindexed search give the same hits. A warm query lists the corpus (a `stat` per file on
disk; one `git ls-tree` for a Git tree) and reads nothing else but the index.

Files are indexed by identity: size, mtime in nanoseconds and inode on disk; the blob id in
Git. A file whose identity changed is re-read, a file that went away is dropped, the rest
is left alone. The FTS table holds each passage's tokens (our tokeniser's output joined by
spaces) under FTS5's `ascii` tokenizer, which splits only at ASCII non-alphanumerics and
keeps every other character: our tokens come back one for one, so a term query finds
exactly the passages holding that token.

Where it lives: for a Git tree, `<common git dir>/obversa/corpus/`; for a directory,
`$XDG_CACHE_HOME/git-obversa/corpus/` (default `~/.cache`). One database per corpus,
safe to delete at any time. If the index cannot be opened or written, search falls back to
a full scan.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from git_obversa.corpus import CorpusFile, passages, tokens

SCHEMA_VERSION = 2
SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    identity TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS passages (
    id INTEGER PRIMARY KEY,
    document INTEGER NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    text TEXT NOT NULL,
    words TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS passages_by_document ON passages(document);
CREATE VIRTUAL TABLE IF NOT EXISTS terms USING fts5(
    words, content='passages', content_rowid='id', tokenize='ascii', detail='none'
);
"""


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
    if connection.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
        connection.execute("BEGIN IMMEDIATE")
        if connection.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            for table in ("terms", "passages", "documents"):
                connection.execute(f"DROP TABLE IF EXISTS {table}")
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    connection.execute(statement)
            connection.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        connection.execute("COMMIT")
    return connection


def _stale(
    connection: sqlite3.Connection, files: list[CorpusFile]
) -> tuple[list[int], list[CorpusFile]]:
    """(documents to drop, files to (re)index) for the listing FILES."""
    stored = {
        key: (id_, identity)
        for id_, key, identity in connection.execute("SELECT id, key, identity FROM documents")
    }
    wanted: dict[str, CorpusFile] = {}
    for file in files:
        wanted.setdefault(file.key, file)
    drop = [
        id_
        for key, (id_, identity) in stored.items()
        if key not in wanted or wanted[key].identity != identity
    ]
    add = [
        file for key, file in wanted.items() if key not in stored or stored[key][1] != file.identity
    ]
    return drop, add


def sync(connection: sqlite3.Connection, source: Any, files: list[CorpusFile]) -> None:
    """Bring the index in line with FILES, reading only files that are new or changed."""
    drop, add = _stale(connection, files)
    if not drop and not add:
        return
    connection.execute("BEGIN IMMEDIATE")
    try:
        drop, add = _stale(connection, files)  # again, now that no other writer can run
        for document in drop:
            connection.execute(
                "INSERT INTO terms(terms, rowid, words)"
                " SELECT 'delete', id, words FROM passages WHERE document = ?",
                (document,),
            )
            connection.execute("DELETE FROM passages WHERE document = ?", (document,))
            connection.execute("DELETE FROM documents WHERE id = ?", (document,))
        for start in range(0, len(add), 256):  # bounded memory on a first build
            batch = add[start : start + 256]
            for file, text in zip(batch, source.read(batch), strict=True):
                _insert(connection, file, text)
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise


def _insert(connection: sqlite3.Connection, file: CorpusFile, text: str) -> None:
    document = connection.execute(
        "INSERT INTO documents(key, identity) VALUES(?, ?)", (file.key, file.identity)
    ).lastrowid
    for start_line, end_line, passage in passages(text):
        words = " ".join(tokens(passage))
        if not words:
            continue  # a passage without a token can never be a hit
        passage_id = connection.execute(
            "INSERT INTO passages(document, start_line, end_line, text, words)"
            " VALUES(?, ?, ?, ?, ?)",
            (document, start_line, end_line, passage, words),
        ).lastrowid
        connection.execute("INSERT INTO terms(rowid, words) VALUES(?, ?)", (passage_id, words))


def query(
    connection: sqlite3.Connection, terms: list[str], operator: str
) -> list[tuple[str, int, int, str, str]]:
    """(document key, start_line, end_line, text, words) of every passage holding one of
    TERMS (operator "OR") or all of them ("AND")."""
    # Tokens are letters and digits only, so quoting each as an FTS5 string is exact.
    match = f" {operator} ".join(f'"{term}"' for term in terms)
    return connection.execute(
        "SELECT d.key, p.start_line, p.end_line, p.text, p.words"
        " FROM passages p JOIN documents d ON d.id = p.document"
        " WHERE p.id IN (SELECT rowid FROM terms WHERE terms MATCH ?)",
        (match,),
    ).fetchall()


def candidates(
    source: Any, files: list[CorpusFile], query_tokens: list[str], limit: int
) -> list[tuple[str, int, int, str, str]] | None:
    """The passages of FILES that can be among the LIMIT best for QUERY_TOKENS, as
    (path, start, end, text, words); None when the index cannot be used (the caller scans).

    A passage holding every term outranks any passage that misses one (it has more matched
    terms, and only it can hold the exact phrase), so when at least LIMIT passages hold
    them all, the others need not be scored.
    """
    terms = list(dict.fromkeys(query_tokens))
    try:
        connection = connect(index_file(source))
    except (OSError, sqlite3.Error):
        return None
    with closing(connection):
        try:
            sync(connection, source, files)
            rows = query(connection, terms, "AND") if len(terms) > 1 else []
            if len(rows) < limit:
                rows = query(connection, terms, "OR")
        except sqlite3.Error:
            return None
    paths: dict[str, list[str]] = {}
    for file in files:
        paths.setdefault(file.key, []).append(file.path)
    return [
        (path, start, end, text, words)
        for key, start, end, text, words in rows
        for path in paths.get(key, ())
    ]
