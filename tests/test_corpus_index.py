"""The corpus index: same hits as a full scan, kept up to date by file identity."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from git_obversa import open_markdown_corpus
from git_obversa.corpus import index as corpus_index
from git_obversa.corpus.index import build as index_build
from git_obversa.corpus.index import index_file, open_index
from git_obversa.corpus.index import query as index_query
from git_obversa.corpus.index.format import FORMAT_VERSION, MAGIC
from tests.gitutil import git, log_git_calls, make_repo

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


@pytest.fixture
def scored(monkeypatch):
    """The passages (their tokens) the index scores while it walks the postings."""
    seen = []
    original = index_query.rank

    def counting(query, words):
        seen.append(words)
        return original(query, words)

    monkeypatch.setattr(index_query, "rank", counting)
    return seen


def zipf_corpus(root, rng, files=240):
    """Skewed word frequencies: the commonest words are in most passages, many times."""
    vocabulary = [f"w{rank}" for rank in range(400)]
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    root.mkdir(parents=True)
    for number in range(files):
        paragraphs = [
            " ".join(rng.choices(vocabulary, weights, k=rng.randint(3, 40)))
            for _ in range(rng.randint(1, 6))
        ]
        (root / f"f{number:03}.md").write_text("\n\n".join(paragraphs) + "\n")
    return vocabulary, weights


def test_common_words_stop_early_and_still_give_a_full_scans_hits(tmp_path, scored):
    rng = random.Random(5)
    root = tmp_path / "corpus"
    vocabulary, weights = zipf_corpus(root, rng)
    made = [rng.choice(vocabulary) for _ in range(30)]  # common to rare single words
    made += [" ".join(rng.choices(vocabulary, weights, k=rng.randint(2, 4))) for _ in range(40)]
    texts = sorted(root.iterdir())
    for _ in range(20):  # phrases that occur, so exact hits exist
        words = rng.choice(texts).read_text().split()
        start = rng.randrange(len(words) - 1)
        made.append(" ".join(words[start : start + rng.randint(2, 3)]))
    made += ["w0 w0", "w1 w0 w1", "w0 unheard", "unheard", "w3 unheard w7"]
    indexed, scanning = open_markdown_corpus(root), open_markdown_corpus(root, index=False)
    for query in made:
        everything = scanning.search(query, 10**6)  # the full order; any limit is a prefix
        for limit in (1, 5, 20, 200):
            assert indexed.search(query, limit) == everything[:limit], (query, limit)

    holding = len(scanning.search("w0", 10**6))
    scored.clear()
    assert [hit["score"] for hit in indexed.search("w0", 3)] == [
        hit["score"] for hit in scanning.search("w0", 3)
    ]
    assert holding > 500 and len(scored) < holding / 4  # not every passage with w0 was scored


def test_ties_are_decided_by_path_without_scoring_every_tied_passage(tmp_path, scored):
    root = tmp_path / "corpus"
    for number in range(300):
        folder = root / f"area-{number % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        body = "shared words here" if number % 2 else f"topic {number} again"
        (folder / f"note-{number:03}.md").write_text(f"# Topic {number}\n\n{body}\n")
    indexed, scanning = open_markdown_corpus(root), open_markdown_corpus(root, index=False)
    for query in ("topic", "topic 17", "topic 17 again", "topic shared", "again topic 18"):
        everything = scanning.search(query, 10**6)
        for limit in (1, 3, 20):
            scored.clear()
            assert indexed.search(query, limit) == everything[:limit], (query, limit)
            assert len(scored) < len(everything) / 2, (query, limit)


def test_git_tree_index_gives_the_same_hits(tmp_path):
    rng = random.Random(7)
    repo = make_repo(tmp_path / "repo")
    generate(repo / "docs", rng, files=30)
    (repo / "docs" / "copy.md").write_bytes((repo / "docs" / "part-1" / "n001.md").read_bytes())
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

    index = open_index(index_file(corpus.source))
    assert index.listing_of("paths") == ["/memories/b.md", "/memories/d.md", "/memories/e.md"]
    alpha = index.term("alpha")
    assert alpha.end - alpha.start == 2  # a.md's and c.md's postings are gone


@pytest.mark.parametrize("way", ["numbers", "runs", "overlay"])
def test_an_updated_index_gives_a_full_scans_hits(tmp_path, monkeypatch, way):
    """Edits, a deletion and new files (before, between and after the others) either go
    into an overlay the base's hits are merged with, or into a new base that renumbers
    the passages of the unchanged files, number by number or by runs of files."""
    monkeypatch.setattr(index_build, "OVERLAY_SHARE", 1 if way == "overlay" else 10**9)
    if way == "runs":
        monkeypatch.setattr(index_build, "SHORT_GROUP", 0)
    rng = random.Random(8)
    root = tmp_path / "corpus"
    vocabulary, weights = zipf_corpus(root, rng, files=120)
    corpus, scanning = open_markdown_corpus(root), open_markdown_corpus(root, index=False)
    made = [" ".join(rng.choices(vocabulary, weights, k=rng.randint(1, 3))) for _ in range(5)]
    made += ["w0", "w1 w0", "w2 w3"]
    assert all(corpus.search(query, 30) == scanning.search(query, 30) for query in made)
    for edit in range(2):
        (root / f"f{20 + edit * 30:03}.md").write_text("w0 w0 w0 w1\n\nw2 w3 w2\n")
        (root / f"f{21 + edit * 30:03}.md").unlink()
        (root / f"a{edit}.md").write_text("w1 w0\n")
        (root / f"g{edit}.md").write_text("w0 w0 w0 w0 w2\n")
        for query in made:
            assert corpus.search(query, 30) == scanning.search(query, 30), (edit, query)
        overlay = open_index(corpus_index.overlay_file(index_file(corpus.source)))
        assert (overlay is not None) == (way == "overlay")


def test_an_edit_reads_one_file_and_writes_only_a_small_overlay(tmp_path, monkeypatch):
    """The base index is left as it is (same file) while edits collect in the overlay;
    when the overlay would hold more than 1/OVERLAY_SHARE of the files, they are merged
    into a new base and the overlay goes."""
    monkeypatch.setattr(index_build, "OVERLAY_SHARE", 4)
    root = generate(tmp_path / "corpus", random.Random(4), files=40)
    corpus, scanning = open_markdown_corpus(root), open_markdown_corpus(root, index=False)
    asked = queries(random.Random(5), 30) + ["zzyzx", "zzyzx battery"]
    assert corpus.search("battery", 5) == scanning.search("battery", 5)
    path = index_file(corpus.source)
    overlay = corpus_index.overlay_file(path)
    base = path.stat()
    reads = CountingReads(corpus.source)
    edits = [f"part-{number % 4}/n{number:03}.md" for number in (0, 1, 2, 3, 4, 5)]
    for count, edited in enumerate(edits, 1):
        with open(root / edited, "a") as handle:
            handle.write("\n\nzzyzx battery battery\n")
        for query in asked:
            assert corpus.search(query, 8) == scanning.search(query, 8), (edited, query)
        if count < 6:  # 2 × 5 changed documents (held anew, replaced in the base) <= 40 / 4
            assert reads.read_paths == [f"/memories/{edited}"]
            assert (path.stat().st_ino, path.stat().st_mtime_ns) == (base.st_ino, base.st_mtime_ns)
            assert overlay.stat().st_size < base.st_size / 4
        else:  # merged: a new base, which reads the files the old one lacks
            assert sorted(reads.read_paths) == sorted(f"/memories/{name}" for name in edits)
            assert path.stat().st_ino != base.st_ino and not overlay.exists()
        reads.read_paths.clear()


def test_a_damaged_overlay_is_rebuilt_never_trusted(tmp_path, monkeypatch):
    """Damage anywhere in the overlay gives a full scan's hits (the search rebuilds)."""
    monkeypatch.setattr(index_build, "OVERLAY_SHARE", 1)
    rng = random.Random(12)
    root = generate(tmp_path / "corpus", rng, files=16)
    asked = queries(rng, 8)
    corpus, scanning = open_markdown_corpus(root), open_markdown_corpus(root, index=False)
    corpus.search("battery")
    overlay = corpus_index.overlay_file(index_file(corpus.source))
    for damage in range(4):
        (root / "part-0" / "n000.md").write_text(f"battery solar 東京 battery {damage}\n")
        expected = {query: scanning.search(query, 5) for query in asked}
        assert {query: corpus.search(query, 5) for query in asked} == expected
        size = overlay.stat().st_size
        corrupted(overlay, 20 + damage * (size - 21) // 3)
        found = subprocess.run(
            [sys.executable, "-c", SEARCH_DIRECTORY, str(root), json.dumps(asked)],
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(found.stdout) == expected, damage


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


def test_an_index_from_an_older_version_is_rebuilt_and_the_old_database_removed(tmp_path):
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "a.md").write_text("alpha beta\n")
    corpus = open_markdown_corpus(root)
    path = index_file(corpus.source)
    path.parent.mkdir(parents=True)
    legacy = path.with_suffix(".sqlite")  # versions 1-3 were SQLite databases
    with closing(sqlite3.connect(legacy)) as connection:
        connection.execute("CREATE TABLE documents(id INTEGER PRIMARY KEY, key, identity)")
    path.write_bytes(MAGIC + (FORMAT_VERSION - 1).to_bytes(4, "little") + bytes(64))
    assert [hit["path"] for hit in corpus.search("beta")] == ["/memories/a.md"]
    assert path.read_bytes()[8:12] == FORMAT_VERSION.to_bytes(4, "little")
    assert not legacy.exists()


def corrupted(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_damaged_index_is_rebuilt_never_trusted(tmp_path):
    """Damage anywhere (header, tables, postings, text blocks) or a cut-off file gives a
    full scan's hits, and the search leaves a sound index behind."""
    rng = random.Random(11)
    root = generate(tmp_path / "corpus", rng, files=24)
    asked = queries(rng, 12)
    scanning = open_markdown_corpus(root, index=False)
    expected = {query: scanning.search(query, 5) for query in asked}
    corpus = open_markdown_corpus(root)
    assert {query: corpus.search(query, 5) for query in asked} == expected
    path = index_file(corpus.source)
    size = path.stat().st_size
    for damage in range(7):
        if damage == 6:
            path.write_bytes(path.read_bytes()[: size // 2])
        else:
            corrupted(path, 20 + damage * (size - 21) // 5)
        # A fresh process: nothing checked so far is remembered.
        found = subprocess.run(
            [sys.executable, "-c", SEARCH_DIRECTORY, str(root), json.dumps(asked)],
            capture_output=True,
            text=True,
            env={**os.environ},
            check=True,
        )
        assert json.loads(found.stdout) == expected, damage
        assert path.stat().st_size == size  # rebuilt whole
        size = path.stat().st_size


SEARCH_DIRECTORY = """
import json, sys
from git_obversa import open_markdown_corpus
corpus = open_markdown_corpus(sys.argv[1])
print(json.dumps({query: corpus.search(query, 5) for query in json.loads(sys.argv[2])}))
"""


def test_the_index_is_no_larger_than_the_corpus(tmp_path):
    """Prose-like text (Zipf-distributed words of one to four syllables, as the benchmark
    generates): passages, tokens and postings together take less room than the files."""
    rng = random.Random(3)
    syllables = [a + b for a in "bcdfghklmnprstvz" for b in "aeiou"]
    vocabulary = sorted({"".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(3000)})
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    root = tmp_path / "corpus"
    root.mkdir()
    for number in range(120):
        paragraphs = [f"# Topic {number}"]
        for _ in range(12):
            words = rng.choices(vocabulary, weights, k=rng.randint(20, 120))
            paragraphs.append(" ".join(words).capitalize() + ".")
        (root / f"note-{number:03}.md").write_text("\n\n".join(paragraphs) + "\n")
    corpus = open_markdown_corpus(root)
    expected = open_markdown_corpus(root, index=False).search(vocabulary[5], 50)
    assert corpus.search(vocabulary[5], 50) == expected
    corpus_bytes = sum(path.stat().st_size for path in root.iterdir())
    assert index_file(corpus.source).stat().st_size <= corpus_bytes


SEARCH_REVISION = """
import json, os, sys, time
from git_obversa import open_markdown_corpus
repo, rev, rounds, expected = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
print("ready", flush=True)
while not os.path.exists(sys.argv[5]):  # start together
    time.sleep(0.001)
for _ in range(rounds):
    for query, hits in expected.items():
        found = open_markdown_corpus("docs", repository=repo, rev=rev).search(query, 10)
        if found != hits:
            sys.exit(f"{rev} {query!r}: {found[:1]} instead of {hits[:1]}")
print("ok")
"""


@pytest.mark.parametrize("differing", ["every file", "one file"])
def test_processes_searching_two_revisions_through_one_index_see_their_own(tmp_path, differing):
    """Both revisions share the index of `docs`, so every search re-indexes what the other
    process left (a new base when every file differs, an overlay when one does); each
    process must still get exactly its own revision's hits."""
    repo = make_repo(tmp_path / "repo")
    revisions = []
    for seed in (1, 2):
        if differing == "every file" or seed == 1:  # 70 files, then 24 of them anew
            generate(repo / "docs", random.Random(seed), files=24 if seed == 2 else 70)
        else:
            (repo / "docs" / "part-1" / "n001.md").write_text("battery solar battery\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"docs {seed}")
        revisions.append(git(repo, "rev-parse", "HEAD").strip())
    asked = queries(random.Random(3), 4)
    start = str(tmp_path / "start")
    processes = []
    for rev in revisions:
        scanning = open_markdown_corpus("docs", repository=repo, rev=rev, index=False)
        expected = json.dumps({query: scanning.search(query, 10) for query in asked})
        processes.append(
            subprocess.Popen(
                [sys.executable, "-c", SEARCH_REVISION, str(repo), rev, "15", expected, start],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for process in processes:
        assert process.stdout.readline() == "ready\n"
    open(start, "w").close()
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert (process.returncode, out.strip()) == (0, "ok"), err
    path = index_file(open_markdown_corpus("docs", repository=repo).source)
    assert corpus_index.overlay_file(path).exists() == (differing == "one file")


def test_a_git_tree_the_index_holds_is_searched_without_listing_it(tmp_path, monkeypatch):
    repo = make_repo(tmp_path / "repo")
    generate(repo / "docs", random.Random(9), files=12)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "docs")
    expected = open_markdown_corpus("docs", repository=repo, index=False).search("solar", 5)
    assert open_markdown_corpus("docs", repository=repo).search("solar", 5) == expected
    log = log_git_calls(tmp_path, monkeypatch)
    # Known by its tree id: opened anew, it finds the id and searches; nothing is listed.
    assert open_markdown_corpus("docs", repository=repo).search("solar", 5) == expected
    calls = log.read_text().splitlines()
    assert len(calls) == 2 and "ls-tree" not in log.read_text(), calls
    # Another tree (a new commit) is listed and indexed, then known too.
    (repo / "docs" / "new.md").write_text("solar solar solar\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "more docs")
    log.write_text("")
    assert open_markdown_corpus("docs", repository=repo).search("solar", 1)[0]["path"] == (
        "/memories/new.md"
    )
    assert "ls-tree" in log.read_text()
    log.write_text("")
    assert open_markdown_corpus("docs", repository=repo, rev="HEAD~1").search("solar", 5) == (
        expected
    )
    assert "ls-tree" in log.read_text()  # the index held the other tree meanwhile
    with pytest.raises(ValueError, match="does not name a tree"):
        open_markdown_corpus("docs", repository=repo, rev="no-such-rev")
    with pytest.raises(TypeError, match="docs/new.md is not a directory in HEAD"):
        open_markdown_corpus("docs/new.md", repository=repo)


def test_another_tree_with_the_same_files_rewrites_only_the_overlay(tmp_path):
    """A commit that changes no visible Markdown file gives the corpus another tree id:
    the index records it in the overlay, reads no file and leaves the base as it was."""
    repo = make_repo(tmp_path / "repo")
    generate(repo / "docs", random.Random(10), files=12)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "docs")
    expected = open_markdown_corpus("docs", repository=repo, index=False).search("solar", 5)
    assert open_markdown_corpus("docs", repository=repo).search("solar", 5) == expected
    (repo / "docs" / "image.png").write_bytes(b"\x89PNG")
    (repo / "docs" / ".hidden.md").write_text("solar solar\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "an image")
    corpus = open_markdown_corpus("docs", repository=repo)
    path = index_file(corpus.source)
    base = path.stat()
    reads = CountingReads(corpus.source)
    assert corpus.search("solar", 5) == expected
    assert reads.read_paths == []
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == (base.st_ino, base.st_mtime_ns)
    assert open_index(corpus_index.overlay_file(path)).tree == corpus.source.tree
