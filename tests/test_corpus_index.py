"""The corpus index: same hits as a full scan, kept up to date by file identity."""

from __future__ import annotations

import os
import random
import sqlite3

import pytest

from git_obversa import open_markdown_corpus
from git_obversa.corpus_index import index_file
from tests.gitutil import git, make_repo

WORDS = (
    "battery warranty charge cell receipt solar panel grid inverter meter volt amp "
    "ﬁle Ｆｕｌｌ naïve café 東京 データ 123 4a ß straße über ΣΟΦΙΑ σοφια 🧠"
).split()


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def generate(root, rng, files=60):
    """Markdown with headings, blank lines, CRLF, repeated words and odd Unicode."""
    for number in range(files):
        lines = []
        for _ in range(rng.randint(3, 25)):
            roll = rng.random()
            if roll < 0.15:
                lines.append("#" * rng.randint(1, 7) + " " + " ".join(rng.choices(WORDS, k=2)))
            elif roll < 0.3:
                lines.append(rng.choice(["", "   ", "\t"]))
            else:
                words = rng.choices(WORDS, k=rng.randint(1, 12))
                lines.append(rng.choice(["", "  "]) + rng.choice([" ", ", ", "-"]).join(words))
        newline = rng.choice(["\n", "\r\n"])
        folder = root / f"part-{number % 4}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"n{number:03}.md").write_bytes(newline.join(lines).encode())
    return root


def queries(rng, count=200):
    made = []
    for _ in range(count):
        words = rng.choices(WORDS, k=rng.randint(1, 4))
        made.append(
            rng.choice([" ", "-", " , "]).join(words).upper()
            if rng.random() < 0.2
            else " ".join(words)
        )
    return made


def test_indexed_and_unindexed_hits_are_identical_for_200_queries(tmp_path):
    rng = random.Random(2024)
    root = generate(tmp_path / "corpus", rng)
    indexed, scanning = open_markdown_corpus(root), open_markdown_corpus(root, index=False)
    compared = 0
    for query in queries(rng):
        limit = rng.choice([1, 3, 20, 1000])
        expected = scanning.search(query, limit)
        assert indexed.search(query, limit) == expected, query
        compared += bool(expected)
    assert compared > 150  # the queries do find things
    assert index_file(indexed.source).exists()


def test_git_tree_index_gives_the_same_hits(tmp_path):
    rng = random.Random(7)
    repo = make_repo(tmp_path / "repo")
    generate(repo / "docs", rng, files=30)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "docs")
    indexed = open_markdown_corpus("docs", repository=repo)
    scanning = open_markdown_corpus("docs", repository=repo, index=False)
    for query in queries(rng, 40):
        assert indexed.search(query, 10) == scanning.search(query, 10), query


class CountingReads:
    """Counts the files the index asks its source to read."""

    def __init__(self, source):
        self.source, self.read_paths = source, []
        original = source.read

        def read(files):
            self.read_paths += [file.path for file in files]
            return original(files)

        source.read = read


def test_updates_follow_file_identity_and_read_only_what_changed(tmp_path):
    root = tmp_path / "corpus"
    root.mkdir()
    for name in ("a", "b", "c"):
        (root / f"{name}.md").write_text(f"{name} alpha\n")
    corpus = open_markdown_corpus(root)
    reads = CountingReads(corpus.source)
    assert len(corpus.search("alpha")) == 3
    assert sorted(reads.read_paths) == ["/memories/a.md", "/memories/b.md", "/memories/c.md"]

    reads.read_paths.clear()
    assert len(corpus.search("alpha")) == 3
    assert reads.read_paths == []  # warm: nothing read but the index

    (root / "b.md").write_text("b beta, now longer\n")
    (root / "c.md").unlink()
    (root / "d.md").write_text("d alpha\n")
    os.rename(root / "a.md", root / "e.md")
    reads.read_paths.clear()
    assert [hit["path"] for hit in corpus.search("alpha")] == ["/memories/d.md", "/memories/e.md"]
    assert sorted(reads.read_paths) == ["/memories/b.md", "/memories/d.md", "/memories/e.md"]
    assert [hit["path"] for hit in corpus.search("beta")] == ["/memories/b.md"]

    with sqlite3.connect(index_file(corpus.source)) as connection:
        keys = sorted(key for (key,) in connection.execute("SELECT key FROM documents"))
        assert keys == ["/memories/b.md", "/memories/d.md", "/memories/e.md"]
        stale = connection.execute("SELECT count(*) FROM terms WHERE terms MATCH 'alpha'")
        assert stale.fetchone()[0] == 2


def test_a_same_size_rewrite_is_seen(tmp_path):
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "a.md").write_text("alpha\n")
    corpus = open_markdown_corpus(root)
    assert corpus.search("alpha")
    (root / "a.md").write_text("gamma\n")  # same size; mtime_ns and the identity change
    os.utime(root / "a.md", ns=(1, 1))
    assert corpus.search("alpha") == []
    assert corpus.search("gamma")[0]["path"] == "/memories/a.md"


def test_an_unusable_cache_falls_back_to_a_full_scan(tmp_path, monkeypatch):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache directory should be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "a.md").write_text("alpha\n")
    assert open_markdown_corpus(root).search("alpha")[0]["path"] == "/memories/a.md"


def test_a_corrupt_index_falls_back_to_a_full_scan(tmp_path):
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "a.md").write_text("alpha\n")
    corpus = open_markdown_corpus(root)
    path = index_file(corpus.source)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a database" * 100)
    assert corpus.search("alpha")[0]["path"] == "/memories/a.md"
