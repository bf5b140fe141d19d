"""A directory corpus's `stat` walk shared with a helper process: same hits, no stale ones."""

from __future__ import annotations

import gc
import itertools
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from git_obversa import open_markdown_corpus
from git_obversa.corpus import index as corpus_index
from git_obversa.corpus import statwalk
from git_obversa.corpus.markdown import visible, visible_markdown


@pytest.fixture(autouse=True)
def shared_walk(tmp_path, monkeypatch):
    """Every walk of two directories or more after a corpus object's first is shared
    with a helper of this test's own, ended after it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(statwalk, "SHARE_FROM", 0)
    monkeypatch.setattr(statwalk, "_helper", None)
    monkeypatch.setattr(statwalk, "_no_helper", False)
    yield
    helper = statwalk._helper
    if helper is not None:
        helper.close()
        try:
            os.waitpid(helper.pid, 0)
        except ChildProcessError:
            pass  # already reaped


def make_corpus(root: Path, folders: int = 6, files: int = 5) -> Path:
    for folder in range(folders):
        (root / f"d{folder}").mkdir(parents=True)
        for number in range(files):
            words = " ".join(f"w{(folder * 7 + number * 3 + k) % 11}" for k in range(6))
            (root / f"d{folder}" / f"f{number}.md").write_text(f"# T{number}\n\n{words}\n")
    (root / "top.md").write_text("w1 w2 w3\n")
    return root


def slow_queries(monkeypatch, edit=None):
    """Make the query run beside the walk take long enough for the helper to answer,
    and call EDIT the first time it runs; return the directories the helper answered."""
    answered: list[str] = []
    collect, best = statwalk._collect, corpus_index.best
    calls = []

    def counting(helper, known, found):
        before = set(found)
        collect(helper, known, found)
        answered.extend(found.keys() - before)

    def slow_best(*args, **kwargs):
        if not calls and edit is not None:
            edit()
        calls.append(1)
        time.sleep(0.05)
        return best(*args, **kwargs)

    monkeypatch.setattr(statwalk, "_collect", counting)
    monkeypatch.setattr(corpus_index, "best", slow_best)
    return answered


def test_the_helper_shares_the_walk_and_hits_stay_a_full_scans(tmp_path, monkeypatch):
    root = make_corpus(tmp_path / "corpus")
    corpus, scanning = open_markdown_corpus(root), open_markdown_corpus(root, index=False)
    asked = ["w1", "w2 w3", "w4 w5 w6", "w0 w10", "t3"]
    assert corpus.search("w1") == scanning.search("w1")  # builds the index
    answered = slow_queries(monkeypatch)
    for query in asked:
        assert corpus.search(query) == scanning.search(query), query
    helper = statwalk._helper
    assert helper is not None and helper.pid != os.getpid()
    assert answered, "the helper answered no directory"
    # Edits anywhere, the helper's end of the walk included: the next search sees them.
    (root / "d5" / "f4.md").write_text("zzyzx w1\n")
    (root / "d0" / "f0.md").unlink()
    os.rename(root / "d3" / "f1.md", root / "d3" / "f9.md")
    (root / "d2" / "new.md").write_text("zzyzx zzyzx\n")
    for query in [*asked, "zzyzx"]:
        assert corpus.search(query) == scanning.search(query), query
    assert [hit["path"] for hit in corpus.search("zzyzx")] == [
        "/memories/d2/new.md",
        "/memories/d5/f4.md",
    ]


@pytest.mark.parametrize("folder", ["d0", "d5"])
def test_an_edit_racing_the_shared_walk_is_seen_by_the_next_search(tmp_path, monkeypatch, folder):
    """The query runs while the files are statted; a file edited meanwhile (at the end
    the searching process stats, or the helper's) is found by the next search at the
    latest, and this search gives the hits of the corpus before or after the edit."""
    root = make_corpus(tmp_path / "corpus")
    corpus, scanning = open_markdown_corpus(root), open_markdown_corpus(root, index=False)
    corpus.search("w1")
    before = scanning.search("zzyzx w1")
    edited = root / folder / "f2.md"

    def edit():
        with open(edited, "a") as handle:
            handle.write("\nzzyzx w1 w1\n")

    slow_queries(monkeypatch, edit)
    racing = corpus.search("zzyzx w1")
    after = scanning.search("zzyzx w1")
    assert racing in (before, after)
    assert corpus.search("zzyzx w1") == after
    assert after[0]["path"] == f"/memories/{folder}/f2.md"


HELPER_PID = """
import sys
from git_obversa import open_markdown_corpus
from git_obversa.corpus import statwalk
statwalk.SHARE_FROM = 0
if sys.argv[2] == "thread":
    import threading
    stop = threading.Event()
    threading.Thread(target=stop.wait).start()
corpus = open_markdown_corpus(sys.argv[1])
corpus.search("w1")  # builds the index; the next walk is shared
print(len(corpus.search("w1")))
print(statwalk._helper.pid if statwalk._helper else "none")
if sys.argv[2] == "thread":
    stop.set()
"""


def state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_the_helper_ends_with_its_process_and_is_not_forked_beside_threads(tmp_path):
    root = make_corpus(tmp_path / "corpus")
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    run = [sys.executable, "-c", HELPER_PID, str(root)]
    found = subprocess.run([*run, "alone"], capture_output=True, text=True, check=True, env=env)
    hits, pid = found.stdout.split()
    assert int(hits) > 0 and pid != "none"
    deadline = time.monotonic() + 10
    while state(int(pid)) not in ("gone", "Z") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert state(int(pid)) in ("gone", "Z")  # ended (a zombie waits for init to reap it)
    found = subprocess.run([*run, "thread"], capture_output=True, text=True, check=True, env=env)
    assert found.stdout.split() == [hits, "none"]


def test_a_directory_judged_at_once_has_each_names_answer():
    """`visible_markdown` (a directory's names at once) says what `visible` and the
    `.md` suffix say name by name, on names that each fail one rule."""
    names = [
        "a.md", "Z9.md", "a-b_c.d.md", "x" * 125 + ".md", "x" * 126 + ".md", ".a.md", "_a.md",
        "-a.md", "a b.md", "a.MD", "a.md.txt", "a", "é.md", "a\udcff.md", "a..md", "1.md",
        "md", ".md", "a.md\n",
    ]  # fmt: skip
    for count in (1, 2, 3):
        for chosen in itertools.product(names, repeat=count):
            expected = all(visible(name) and name.endswith(".md") for name in chosen)
            assert visible_markdown(list(chosen)) == expected, chosen


def test_a_directory_of_md_names_still_sorts_out_links_folders_and_fifos(tmp_path):
    """Every name ends in `.md`, so the directory is first taken for one of files: the
    kinds that `stat` gives (not following links) still decide."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("planted secret\n")
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "a.md").symlink_to(outside / "secret.md")
    (root / "b.md").write_text("planted real\n")
    (root / "c.md").mkdir()
    (root / "c.md" / "x.md").write_text("planted inner\n")
    os.mkfifo(root / "f.md")
    corpus, scanning = open_markdown_corpus(root), open_markdown_corpus(root, index=False)
    for _ in range(3):  # built, then walked again (shared with the helper)
        found = corpus.search("planted")
        assert [hit["path"] for hit in found] == ["/memories/b.md", "/memories/c.md/x.md"]
        assert found == scanning.search("planted")


def test_a_warm_search_leaves_nothing_for_the_cyclic_collector(tmp_path):
    """What a walk and its query made is freed when they end, not left in reference
    cycles for a collection to trace during a later query."""
    corpus = open_markdown_corpus(make_corpus(tmp_path / "corpus"))
    corpus.search("w1")
    corpus.search("w1")  # shared with the helper from now on
    gc.collect()
    collecting = gc.isenabled()
    gc.disable()
    try:
        assert corpus.search("w2 w3")
        assert gc.collect() == 0
    finally:
        if collecting:
            gc.enable()
