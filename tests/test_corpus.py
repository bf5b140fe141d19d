"""The Markdown corpus (SPEC.md §5, scenarios 75–80), on disk and read from a Git tree."""

from __future__ import annotations

import os
import unicodedata

import pytest

from git_obversa import open_markdown_corpus
from git_obversa.corpus.passages import TOKEN, tokens
from tests.gitutil import git, make_repo, obversa

GUIDE = (
    "# Battery policy\n\nThe battery warranty lasts eight years.\n"
    "Keep the purchase receipt.\n\nCharging guidance is separate.\n"
)
TERMS = "# Warranty terms\n\nWarranty cover applies when a battery remains installed.\n"
REPEATED = "Battery cover applies. Warranty claims mention the battery again.\n"
WRITES = [
    {"command": "create", "path": "/memories/new.md", "text": "new"},
    {
        "command": "str_replace",
        "path": "/memories/nested/guide.md",
        "oldText": "one",
        "newText": "x",
    },
    {"command": "insert", "path": "/memories/nested/guide.md", "insertLine": 1, "text": "x"},
    {"command": "delete", "path": "/memories/nested/guide.md"},
    {"command": "rename", "oldPath": "/memories/nested/guide.md", "newPath": "/memories/m.md"},
]


def write_files(root, files):
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.fixture(params=["directory", "git-tree"])
def opened(request, tmp_path):
    """open(files) -> corpus, for a directory and for the same files committed to Git."""

    def open_corpus(files, index=True):
        if request.param == "directory":
            return open_markdown_corpus(write_files(tmp_path / "corpus", files), index=index)
        repo = make_repo(tmp_path / "repo")
        write_files(repo / "docs", files)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "docs")
        return open_markdown_corpus("docs", repository=repo, index=index)

    return open_corpus


@pytest.mark.parametrize("index", [True, False], ids=["indexed", "scan"])
def test_75_exact_phrase_first_with_its_lines(opened, index):
    corpus = opened(
        {
            "guide.md": GUIDE,
            "nested/terms.md": TERMS,
            "repeated.md": REPEATED,
            "ignored notes.txt": "battery warranty",
        },
        index,
    )
    hits = corpus.search("battery warranty", limit=3)
    assert [hit["path"] for hit in hits] == [
        "/memories/guide.md",
        "/memories/repeated.md",
        "/memories/nested/terms.md",
    ]
    assert hits[0]["passage"] == {
        "start_line": 3,
        "end_line": 4,
        "text": "The battery warranty lasts eight years.\nKeep the purchase receipt.",
    }
    assert hits[0]["score"] > hits[1]["score"] > hits[2]["score"]
    assert hits[0]["score"] == 1_000_000_000 + 2 * 1_000_000 + 2


def test_76_ties_by_path_and_nothing_for_a_miss(opened):
    corpus = opened({"b.md": "Solar guidance.\n", "a.md": "Solar guidance.\n"})
    hits = corpus.search("solar")
    assert [(h["path"], h["passage"]["start_line"], h["passage"]["end_line"]) for h in hits] == [
        ("/memories/a.md", 1, 1),
        ("/memories/b.md", 1, 1),
    ]
    assert corpus.search("wind") == []
    assert corpus.search("   ") == []
    assert corpus.search("?!", limit=0) == []  # no tokens: the limit is not even checked


HIDDEN = {
    ".private/hidden.md": "Planted searchable phrase.\n",
    "_index.md": "Planted searchable phrase.\n",
    "café.md": "Planted searchable phrase.\n",
    "a" * 126 + ".md": "Planted searchable phrase.\n",
    "notes with spaces.md": "Planted searchable phrase.\n",
    "included.md": "Planted searchable phrase.\n",
}


def test_77_hidden_and_invalid_names_are_skipped(opened):
    corpus = opened(HIDDEN)
    assert [hit["path"] for hit in corpus.search("planted searchable phrase")] == [
        "/memories/included.md"
    ]
    root = corpus.memory.execute({"command": "view", "path": "/memories"})
    assert root["value"]["entries"] == [
        {"name": "included.md", "path": "/memories/included.md", "kind": "file"}
    ]
    outside = corpus.memory.execute({"command": "view", "path": "/memories/../outside.md"})
    assert outside["error"]["code"] == "INVALID_PATH"


def test_77_through_a_symlinked_root(tmp_path):
    root = write_files(tmp_path / "corpus", HIDDEN)
    link = tmp_path / "corpus-link"
    link.symlink_to(root, target_is_directory=True)
    corpus = open_markdown_corpus(link)
    assert [hit["path"] for hit in corpus.search("planted searchable phrase")] == [
        "/memories/included.md"
    ]
    assert corpus.memory.scope == f"memory-markdown:{link}"


def test_symlinks_inside_the_corpus_are_never_followed(tmp_path):
    outside = write_files(tmp_path / "outside", {"secret.md": "planted secret\n"})
    root = write_files(tmp_path / "corpus", {"real.md": "planted real\n"})
    (root / "linked.md").symlink_to(outside / "secret.md")
    (root / "linked-dir").symlink_to(outside, target_is_directory=True)
    corpus = open_markdown_corpus(root)
    assert [hit["path"] for hit in corpus.search("planted")] == ["/memories/real.md"]
    entries = corpus.memory.execute({"command": "view", "path": "/memories"})["value"]["entries"]
    assert [entry["name"] for entry in entries] == ["real.md"]
    for path in ("/memories/linked.md", "/memories/linked-dir/secret.md"):
        result = corpus.memory.execute({"command": "view", "path": path})
        assert result["error"] == {
            "code": "UNSAFE_STORAGE",
            "message": "The corpus path crosses a symbolic link.",
            "path": path,
        }


def test_78_read_only_view_uses_the_port_line_model(opened):
    corpus = opened({"nested/guide.md": "one\ntwo\nthree\n"})
    assert corpus.memory.execute({"command": "view", "path": "/memories"}) == {
        "ok": True,
        "command": "view",
        "value": {
            "kind": "directory",
            "path": "/memories",
            "entries": [{"name": "nested", "path": "/memories/nested", "kind": "directory"}],
        },
    }
    ranged = {"command": "view", "path": "/memories/nested/guide.md", "viewRange": [2, -1]}
    assert corpus.memory.execute(ranged) == {
        "ok": True,
        "command": "view",
        "value": {
            "kind": "file",
            "path": "/memories/nested/guide.md",
            "text": "two\nthree\n",
            "byte_length": 10,
            "lines": {"start": 2, "end": 3, "total": 3},
        },
    }
    directory_range = {"command": "view", "path": "/memories/nested", "view_range": [1, 1]}
    assert corpus.memory.execute(directory_range)["error"]["code"] == "INVALID_RANGE"
    outside = {"command": "view", "path": "/memories/nested/guide.md", "view_range": [1, 9]}
    assert corpus.memory.execute(outside)["error"]["details"] == {"total_lines": 3}
    missing = corpus.memory.execute({"command": "view", "path": "/memories/nested/no.md"})
    assert missing["error"]["code"] == "NOT_FOUND"


def test_79_every_write_is_refused(opened):
    corpus = opened({"nested/guide.md": "one\ntwo\nthree\n"})
    for command in WRITES:
        assert corpus.memory.execute(command) == {
            "ok": False,
            "command": command["command"],
            "error": {"code": "INVALID_COMMAND", "message": "The markdown corpus is read-only."},
        }
    unknown = corpus.memory.execute({"command": "write"})
    assert unknown["error"]["message"] == "The memory command is not supported."
    assert corpus.memory.execute("view")["command"] == "unknown"


@pytest.mark.parametrize("limit", [0, -1, 1.5, True, "3"])
def test_80_limit_and_query_are_checked(opened, limit):
    corpus = opened({"a.md": "Solar guidance.\n"})
    with pytest.raises(TypeError, match="^limit must be a positive safe integer.$"):
        corpus.search("solar", limit=limit)
    with pytest.raises(TypeError, match="^query must be a string.$"):
        corpus.search(None)


def test_non_markdown_and_non_regular_files_are_not_files(opened):
    corpus = opened({"notes.txt": "text\n", "a.md": "x\n"})
    result = corpus.memory.execute({"command": "view", "path": "/memories/notes.txt"})
    assert result["error"]["code"] == "NOT_FOUND"


def test_opening_rules(tmp_path, repo):
    for bad in ("", "   ", None, 3):
        with pytest.raises(TypeError, match="directory must be a non-empty string."):
            open_markdown_corpus(bad)
    (tmp_path / "file.md").write_text("x")
    with pytest.raises(TypeError, match=r"file\.md is not a directory\."):
        open_markdown_corpus(tmp_path / "file.md").search("x")
    with pytest.raises(TypeError, match=r"^README\.md is not a directory in HEAD\.$"):
        open_markdown_corpus("README.md", repository=repo)
    with pytest.raises(ValueError, match="does not name a tree"):
        open_markdown_corpus(repository=repo, rev="no-such-branch")


def test_an_over_long_corpus_path_fails_the_search(tmp_path):
    deep = "/".join(["d" * 120] * 9) + "/x.md"  # over 1024 bytes as /memories/...
    root = write_files(tmp_path / "corpus", {deep: "word\n"})
    with pytest.raises(TypeError, match="^Corpus path exceeds 1024 bytes: "):
        open_markdown_corpus(root).search("word")


def test_passages_split_at_blank_lines_and_headings(tmp_path):
    text = "intro line\n## Heading\nbody one\r\nbody two\n   \n#hashtag line\n####### seven\n"
    root = write_files(tmp_path / "corpus", {"a.md": text})
    hits = open_markdown_corpus(root, index=False).search("heading body intro hashtag seven")
    spans = sorted((h["passage"]["start_line"], h["passage"]["end_line"]) for h in hits)
    assert spans == [(1, 1), (2, 2), (3, 4), (6, 7)]


def test_tokens_are_nfkc_lowercase_letters_and_digits(tmp_path):
    root = write_files(tmp_path / "corpus", {"a.md": "Ｆｕｌｌ width ＡＢＣ-123 naïve_tail\n"})
    corpus = open_markdown_corpus(root)
    assert corpus.search("full WIDTH abc 123")[0]["score"] == 1_004_000_004
    assert corpus.search("naïve tail")[0]["score"] == 1_002_000_002


def test_ascii_tokens_take_a_shortcut_to_the_same_tokens():
    """ASCII text skips NFKC and the pattern; every ASCII character splits the same way."""
    every = "".join(map(chr, range(128)))
    texts = [every, every[::-1], "Mixed_CASE 42nd\x1fv2.0 a-b\tc\x00d"]
    for text in texts:
        assert tokens(text) == TOKEN.findall(unicodedata.normalize("NFKC", text).lower())


def test_git_tree_corpus_needs_no_checkout_and_follows_its_rev(repo):
    write_files(repo / "docs", {"guide.md": "first answer\n"})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "v1")
    (repo / "docs" / "guide.md").write_text("second answer\n")
    git(repo, "commit", "-q", "-am", "v2")
    (repo / "docs" / "guide.md").write_text("uncommitted answer\n")
    status = git(repo, "status", "--porcelain")
    bare = repo.parent / "bare.git"
    git(repo, "clone", "-q", "--bare", str(repo), str(bare))

    def texts(corpus):
        return [hit["passage"]["text"] for hit in corpus.search("answer")]

    assert texts(open_markdown_corpus("docs", repository=repo)) == ["second answer"]
    assert texts(open_markdown_corpus("docs", repository=repo, rev="HEAD~1")) == ["first answer"]
    assert texts(open_markdown_corpus("docs/", repository=bare)) == ["second answer"]
    whole = open_markdown_corpus(repository=repo)
    assert [hit["path"] for hit in whole.search("answer")] == ["/memories/docs/guide.md"]
    assert git(repo, "status", "--porcelain") == status
    assert (repo / "obversa").exists() is False
    assert list((repo / ".git" / "obversa" / "corpus").glob("*.index"))


def test_git_tree_symlinks_and_submodule_entries_are_skipped(repo):
    write_files(repo / "docs", {"real.md": "planted real\n"})
    os.symlink("real.md", repo / "docs" / "link.md")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "docs")
    corpus = open_markdown_corpus("docs", repository=repo)
    assert [hit["path"] for hit in corpus.search("planted")] == ["/memories/real.md"]
    result = corpus.memory.execute({"command": "view", "path": "/memories/link.md"})
    assert result["error"]["code"] == "UNSAFE_STORAGE"


# The CLI ------------------------------------------------------------------------------


def test_cli_search_and_view(tmp_path):
    root = write_files(tmp_path / "corpus", {"guide.md": GUIDE, "repeated.md": REPEATED})
    found = obversa("corpus", "search", "battery warranty", "--dir", str(root), cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    # Labelled with the file the user can open, not the memory path /memories/guide.md.
    assert found.stdout.startswith(
        f"{root}/guide.md:3-4\n    The battery warranty lasts eight years.\n"
    )
    as_json = obversa(
        "corpus", "search", "battery", "--dir", str(root), "--limit", "1", "--json", cwd=tmp_path
    )
    import json

    assert [hit["path"] for hit in json.loads(as_json.stdout)] == ["/memories/repeated.md"]
    view = obversa("corpus", "view", "guide.md", "--dir", str(root), "--range", "3", "4", cwd=root)
    assert view.stdout == "The battery warranty lasts eight years.\nKeep the purchase receipt.\n"
    listing = obversa("corpus", "view", "/", cwd=root)
    assert listing.stdout == "guide.md\nrepeated.md\n"
    missing = obversa("corpus", "view", "nope.md", cwd=root)
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        "git obversa corpus: NOT_FOUND: The memory path does not exist. (/memories/nope.md)"
    )
    bad = obversa("corpus", "search", "x", "--limit", "0", cwd=root)
    assert bad.returncode == 2 and "argument --limit: '0' is not a whole number" in bad.stderr
    assert "examples:" in obversa("corpus", "search", "--help", cwd=root).stdout


def test_cli_search_in_a_git_tree(repo):
    write_files(repo / "docs", {"guide.md": GUIDE})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "docs")
    (repo / "docs" / "guide.md").unlink()
    found = obversa("corpus", "search", "warranty", "--rev", "HEAD", "--dir", "docs", cwd=repo)
    assert found.returncode == 0, found.stderr
    assert found.stdout.startswith("HEAD:docs/guide.md:3-4\n")  # what `git show` takes
    bad = obversa("corpus", "search", "x", "--rev", "nope", "--dir", "docs", cwd=repo)
    assert bad.returncode == 1
    assert bad.stderr.startswith("git obversa corpus: cannot open the corpus --rev nope")
    assert len(bad.stderr.strip().splitlines()) == 1


def test_a_file_swapped_after_listing_is_never_read_through_a_link_or_a_fifo(tmp_path):
    outside = write_files(
        tmp_path / "outside", {"secret.md": "planted secret\n", "b.md": "planted secret\n"}
    )
    root = write_files(
        tmp_path / "corpus",
        {"a.md": "planted own\n", "d/b.md": "planted own\n", "f.md": "planted own\n"},
    )
    source = open_markdown_corpus(root).source
    listed = source.files()
    assert [file.path for file in listed] == [
        "/memories/a.md", "/memories/d/b.md", "/memories/f.md"
    ]  # fmt: skip
    (root / "a.md").unlink()
    (root / "a.md").symlink_to(outside / "secret.md")
    for child in (root / "d").iterdir():
        child.unlink()
    (root / "d").rmdir()
    (root / "d").symlink_to(outside, target_is_directory=True)
    (root / "f.md").unlink()
    os.mkfifo(root / "f.md")  # opening it for reading would wait for a writer
    assert source.read(listed) == ["", "", ""]  # as if gone: a listing now leaves them out
    assert source.files() == []
    view = open_markdown_corpus(root).memory.execute({"command": "view", "path": "/memories/f.md"})
    assert view["error"]["code"] == "NOT_FOUND"


def test_a_blob_missing_from_the_repository_is_one_clear_error(repo):
    write_files(repo / "docs", {"guide.md": GUIDE})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "docs")
    blob = git(repo, "rev-parse", "HEAD:docs/guide.md").strip()
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    for index in ([], ["--no-index"]):
        found = obversa(
            "corpus", "search", "warranty", "--rev", "HEAD", "--dir", "docs", *index, cwd=repo
        )
        assert found.returncode == 1
        assert found.stderr == (
            f"git obversa corpus: /memories/guide.md: Git object {blob} is missing from "
            f"{repo}; fetch it (or check out the files) and search again\n"
        )
