"""The blame cache: its answers equal `git blame --porcelain` line for line.

Every check compares against git itself: for each line, the commit, the line number in
that commit, the file's name there, and the text, as `git blame --porcelain` prints them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from git_obversa.lean.checksum import checksum
from git_obversa.lookup import blame, cache, git_blame, head_start
from git_obversa.lookup.why import why
from git_obversa.repo import location, refs
from tests.gitutil import git, log_git_calls, obversa, settle

ROOT = Path(__file__).resolve().parents[1]


def porcelain(repo: Path, path: str, rev: str | None = None) -> list[tuple[str, int, str, str]]:
    """(commit, line in that commit, file name there, text) per line, from git blame."""
    args = ["blame", "--porcelain"] + ([rev] if rev else []) + ["--", path]
    rows = subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True).stdout.split(
        b"\n"
    )
    result = []
    name_of: dict[str, str] = {}
    sha = origin = None
    for row in rows:
        if row[:1] == b"\t":
            text = row[1:].removesuffix(b"\r").decode("utf-8", "replace")
            result.append((sha, origin, name_of[sha], text))
        elif row.startswith(b"filename "):
            name_of[sha] = git_blame._filename(row[9:])
        else:
            fields = row.split(b" ")
            if len(fields) >= 3 and len(fields[0]) in (40, 64) and fields[1].isdigit():
                sha, origin = fields[0].decode(), int(fields[1])
    return result


def folder(repo: Path) -> str:
    return cache.directory(
        git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir")[:-1]
    )


def entry(repo: Path, rev: str, path: str) -> list[tuple[str, int, str, str]]:
    """The cached table of PATH at REV, in porcelain's terms."""
    commit = git(repo, "rev-parse", rev)[:-1]
    found = cache.load(folder(repo), commit, path)
    assert found is not None, f"no cache entry for {path} at {rev}"
    table, blob = found
    assert blob == git(repo, "rev-parse", f"{commit}:{path}")[:-1]  # the blob it records
    commits, owners, origins, sources, names, texts = table
    return [
        (commits[owner][0], origin, names[source], text)
        for owner, origin, source, text in zip(owners, origins, sources, texts, strict=True)
    ]


def assert_cached_is_git(repo: Path, path: str, rev: str | None = "HEAD", api: bool = False):
    """The cached lookup equals git blame line for line (and, with API, the uncached
    lookup field for field)."""
    lines: list[tuple[int, str, str]] = []
    found = blame.lookup(repo, path, rev=rev, lines=lines)
    expected = porcelain(repo, path, rev)
    assert [(sha, text) for _, sha, text in lines] == [(e[0], e[3]) for e in expected]
    assert [number for number, _, _ in lines] == list(range(1, len(expected) + 1))
    if rev is not None:
        assert entry(repo, rev, path) == expected
    for commit in found.values():
        owned = {n for first, last in commit["ranges"] for n in range(first, last + 1)}
        assert owned == {n for n, sha, _ in lines if sha == commit["commit"]}
        assert commit["paths"] == list(
            dict.fromkeys(e[2] for e in expected if e[0] == commit["commit"])
        )
    if api:
        uncached = blame.lookup(repo, path, rev=rev, cache=False)
        for value in (found, uncached):
            for commit in value.values():
                if not commit["commit"].strip("0"):
                    commit["date"] = "now"  # the time of the call
        assert found == uncached


def write(repo: Path, name: str, text: str) -> None:
    (repo / name).parent.mkdir(parents=True, exist_ok=True)
    (repo / name).write_text(text)


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")[:-1]


def numbered(count: int, tag: str = "") -> str:
    return "".join(f"line {n}{tag}\n" for n in range(count))


def load_bench_builder():
    spec = importlib.util.spec_from_file_location("bench_why", ROOT / "bench" / "why.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build


def test_the_2000_commit_bench_file_at_20_points(tmp_path):
    repo = tmp_path / "repo"
    load_bench_builder()(repo, 2000)
    history = git(repo, "rev-list", "--first-parent", "HEAD", "--", "notes.md").split()
    points = sorted(random.Random(5).sample(range(len(history)), 19)) + [0]
    # Oldest first, so that most lookups extend the one before (up to blame.CHAIN commits
    # back); the first and those further apart run git blame; HEAD comes last.
    for number, index in enumerate(reversed(points)):
        assert_cached_is_git(repo, "notes.md", history[index], api=number == 19)
    # Now every one of them is a cache hit, and still right.
    assert_cached_is_git(repo, "notes.md", history[points[9]])
    assert_cached_is_git(repo, "notes.md", None)


def test_this_repositorys_own_files(tmp_path):
    if subprocess.run(["git", "rev-parse"], cwd=ROOT, capture_output=True).returncode != 0:
        pytest.skip("not run from a Git checkout")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--shared", "--no-checkout", str(ROOT), str(clone))
    git(clone, "checkout", "-q", "--detach", git(ROOT, "rev-parse", "HEAD")[:-1])
    files = git(clone, "ls-files", "*.py", "*.md", "*.toml").split()
    assert len(files) > 20
    back = "HEAD~3" if git(clone, "rev-list", "--count", "HEAD")[:-1] > "3" else "HEAD"
    for name in files:
        if subprocess.run(["git", "cat-file", "-e", f"{back}:{name}"], cwd=clone).returncode == 0:
            blame.lookup(clone, name, rev=back)  # so that HEAD's blame extends it
        assert_cached_is_git(clone, name)


def test_merges_and_a_whole_file_rename(repo):
    write(repo, "a.txt", numbered(30))
    commit_all(repo, "a")
    git(repo, "checkout", "-q", "-b", "side")
    write(repo, "a.txt", numbered(30).replace("line 3\n", "line 3 side\n"))
    commit_all(repo, "side edits line 3")
    git(repo, "checkout", "-q", "main")
    write(repo, "a.txt", numbered(30).replace("line 20\n", "line 20 main\n"))
    commit_all(repo, "main edits line 20")
    git(repo, "merge", "-q", "--no-edit", "side")  # a merge that changes a.txt
    git(repo, "mv", "a.txt", "b.txt")
    commit_all(repo, "rename a.txt to b.txt")
    text = (repo / "b.txt").read_text()
    write(repo, "b.txt", text.replace("line 10\n", "line 10 renamed\n") + "tail\n")
    commit_all(repo, "edit after the rename")
    git(repo, "checkout", "-q", "-b", "other", "HEAD~1")
    write(repo, "b.txt", "head\n" + (repo / "b.txt").read_text())
    commit_all(repo, "other adds a head line")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-edit", "other")
    write(repo, "unrelated.txt", "x\n")
    commit_all(repo, "unrelated")
    chain = git(repo, "rev-list", "--first-parent", "--reverse", "HEAD").split()
    for sha in chain:
        names = git(repo, "ls-tree", "--name-only", sha).split()
        for name in {"a.txt", "b.txt"} & set(names):
            assert_cached_is_git(repo, name, sha)
    assert_cached_is_git(repo, "b.txt", "HEAD", api=True)
    assert {e[2] for e in entry(repo, "HEAD", "b.txt")} == {"a.txt", "b.txt"}


def test_after_amend_rebase_and_reset(repo):
    write(repo, "f.txt", numbered(20))
    commit_all(repo, "one")
    for step in range(3):
        text = (repo / "f.txt").read_text().replace(f"line {step * 5}\n", f"step {step}\n")
        write(repo, "f.txt", text)
        commit_all(repo, f"step {step}")
    assert_cached_is_git(repo, "f.txt")

    write(repo, "f.txt", (repo / "f.txt").read_text() + "amended\n")
    git(repo, "add", "f.txt")
    git(repo, "commit", "-q", "--amend", "-m", "step 2, amended")
    assert_cached_is_git(repo, "f.txt", api=True)

    git(repo, "checkout", "-q", "-b", "topic", "HEAD~2")
    write(repo, "f.txt", "top\n" + (repo / "f.txt").read_text())
    commit_all(repo, "topic adds a top line")
    assert_cached_is_git(repo, "f.txt")
    git(repo, "checkout", "-q", "main")
    git(repo, "rebase", "-q", "topic")
    for rev in ("HEAD", "HEAD~1", "HEAD~2"):
        assert_cached_is_git(repo, "f.txt", rev)

    git(repo, "reset", "-q", "--hard", "HEAD~2")
    assert_cached_is_git(repo, "f.txt", api=True)
    assert_cached_is_git(repo, "f.txt", None)


def test_the_working_tree_is_laid_over_head(repo):
    write(repo, "w.txt", numbered(12))
    commit_all(repo, "w")
    write(repo, "w.txt", numbered(12).replace("line 4\n", "line 4 edited\n"))
    commit_all(repo, "edit 4")
    assert_cached_is_git(repo, "w.txt")
    text = numbered(12).replace("line 4\n", "line 4 edited\n")
    text = text.replace("line 0\n", "").replace("line 7\n", "line 7 now\nnew\n") + "end"
    write(repo, "w.txt", text)
    assert_cached_is_git(repo, "w.txt", None, api=True)
    (repo / "sub").mkdir()
    found = blame.lookup(repo / "sub", "../w.txt", 3, 7, rev=None)
    assert found == blame.lookup(repo / "sub", "../w.txt", 3, 7, rev=None, cache=False) | {
        sha: {**c, "date": found[sha]["date"]}
        for sha, c in blame.lookup(repo / "sub", "../w.txt", 3, 7, rev=None, cache=False).items()
        if not sha.strip("0")
    }
    with pytest.raises(blame.BlameError, match="has only 13 lines; line 20 is past the end"):
        blame.lookup(repo, "w.txt", 20, 20, rev=None)


@pytest.fixture
def started(monkeypatch) -> list[str]:
    """The git commands the engine starts in this process, in the order it starts them."""
    commands: list[str] = []
    real_start, real_spawn = blame.git.start, blame.git.spawn

    def start(args, *rest, **options):  # the porcelain blame and its reader
        commands.append(f"{args[0]} (porcelain path)")
        return real_start(args, *rest, **options)

    def spawn(args, *rest, **options):  # every other process: `outputs` spawns each too
        commands.append(args[0])
        return real_spawn(args, *rest, **options)

    monkeypatch.setattr(blame.git, "start", start)
    monkeypatch.setattr(blame.git, "spawn", spawn)
    return commands


def test_a_cold_lookup_of_the_working_tree_blames_before_asking_git_anything_else(repo, started):
    write(repo, "sub/s.txt", numbered(9))
    commit_all(repo, "s")
    write(repo, "sub/s.txt", numbered(9).replace("line 5\n", "five\n"))
    commit_all(repo, "five")
    # Nothing kept for the file: blame of the working tree starts first; it is HEAD's
    # blame (the tree is clean), so it is kept for HEAD.
    given: list[dict] = []
    found = blame.lookup(repo, "sub/s.txt", rev=None, prepare=given.append)
    assert started == ["blame", "cat-file", "rev-parse", "config", "--literal-pathspecs"]
    assert sorted(c["commit"] for c in given) == sorted(found)
    assert_cached_is_git(repo, "sub/s.txt", None)  # now from the cache
    assert entry(repo, "HEAD", "sub/s.txt") == porcelain(repo, "sub/s.txt", "HEAD")
    # Changed in the working tree: that blame is not HEAD's, so HEAD is blamed instead
    # and the change laid over it, as from a warm cache; from a subdirectory too.
    write(repo, "sub/s.txt", "top\n" + numbered(9).replace("line 2\n", ""))
    for cold in (True, False):
        if cold:
            cache_folder = Path(folder(repo))
            for name in os.listdir(cache_folder):
                (cache_folder / name).unlink()
        lines: list[tuple[int, str, str]] = []
        blame.lookup(repo / "sub", "s.txt", rev=None, lines=lines)
        expected = porcelain(repo, "sub/s.txt")
        assert [(sha, text) for _, sha, text in lines] == [(e[0], e[3]) for e in expected]
        assert entry(repo, "HEAD", "sub/s.txt") == porcelain(repo, "sub/s.txt", "HEAD")


def test_without_the_cache_a_whole_file_is_read_as_blame_runs(repo):
    # The streamed lookup (no texts) answers as the porcelain one (the lines asked for).
    write(repo, "p.txt", numbered(30))
    commit_all(repo, "p")
    write(repo, "p.txt", numbered(30).replace("line 7\n", "seven\nmore\n"))
    commit_all(repo, "seven")
    moved = numbered(30).splitlines(keepends=True)
    write(repo, "q.txt", "".join(moved[20:] + moved[:20]))  # lines copied, moved
    commit_all(repo, "q")
    for rev in ("HEAD", "HEAD~1", None):
        for name, follow in (("p.txt", {}), ("q.txt", {"moves": True, "copies": 1})):
            if rev != "HEAD~1" or name == "p.txt":
                streamed = blame.lookup(repo, name, rev=rev, cache=False, **follow)
                porcelain_lookup = blame.lookup(
                    repo, name, rev=rev, cache=False, lines=[], **follow
                )
                assert streamed == porcelain_lookup
    assert not Path(folder(repo)).exists()
    # From a subdirectory, by an absolute path, and with the working tree changed (lines
    # changed are the all-zero commit's; lines only deleted leave fewer lines than the
    # blob has): the same answer as the porcelain blame's.
    (repo / "sub").mkdir()
    for where, name in ((repo / "sub", "../p.txt"), (repo, str(repo / "p.txt"))):
        streamed = blame.lookup(where, name, rev=None, cache=False)
        assert streamed == blame.lookup(where, name, rev=None, cache=False, lines=[])
    committed = (repo / "p.txt").read_text()
    for changed in ("line 3\n", ""):
        write(repo, "p.txt", committed.replace("line 2\n", changed))
        streamed = blame.lookup(repo, "p.txt", rev=None, cache=False)
        porcelain_lookup = blame.lookup(repo, "p.txt", rev=None, cache=False, lines=[])
        for commit in (*streamed.values(), *porcelain_lookup.values()):
            if not commit["commit"].strip("0"):
                commit["date"] = "now"  # the time of the call
        assert streamed == porcelain_lookup
    git(repo, "checkout", "--", "p.txt")
    # A caller laying out its text ahead is given each commit's dict as it is read.
    given: list[dict] = []
    found = blame.lookup(repo, "p.txt", rev=None, cache=False, prepare=given.append)
    assert sorted(c["commit"] for c in given) == sorted(found)
    assert all(commit is found[commit["commit"]] for commit in given)
    # A binary file is refused as before, unless a textconv driver makes text of it for
    # blame (its blob is then not what blame reads: git blame answers).
    (repo / "t.bin").write_bytes(b"one\0\ntwo\n")
    commit_all(repo, "binary")
    with pytest.raises(blame.BlameError, match="t.bin is a binary file"):
        blame.lookup(repo, "t.bin", rev=None, cache=False)
    write(repo, ".gitattributes", "*.bin diff=strip\n")
    git(repo, "config", "diff.strip.textconv", "perl -pe 's/\\x00//g'")
    found = blame.lookup(repo, "t.bin", rev=None, cache=False)
    lines: list[tuple[int, str, str]] = []
    assert found == blame.lookup(repo, "t.bin", rev=None, cache=False, lines=lines)
    assert [text for _, _, text in lines] == ["one", "two"]


def test_a_damaged_entry_is_rebuilt_not_trusted(repo):
    write(repo, "d.txt", numbered(8))
    commit_all(repo, "d")
    expected = blame.lookup(repo, "d.txt", cache=False)
    assert blame.lookup(repo, "d.txt") == expected
    commit = git(repo, "rev-parse", "HEAD")[:-1]
    location = Path(folder(repo)) / cache.entry_name(commit, "d.txt")
    good = location.read_bytes()
    payload = good.partition(b"\n")[2]
    import marshal

    forged = marshal.dumps((commit, "d.txt", "-", [], [0], [1], [0], [], ["x"]))  # owner of nothing
    header = b"%s %08x %d -\n" % (cache.FORMAT, cache.checksum(forged), len(forged))
    for damage in (
        b"",
        good[: len(good) // 2],
        good.replace(b"line 3", b"line 9"),
        b"obversa-blame-cache 0 " + good.partition(b" ")[2],
        good.partition(b"\n")[0] + b"\n" + payload[:-1] + b"\x00",
        header + forged,
    ):
        location.write_bytes(damage)
        assert blame.lookup(repo, "d.txt") == expected
        assert location.read_bytes() == good  # deleted when it did not verify, then rewritten


def test_a_large_entry_is_checked_as_a_small_one_is(repo):
    """One checksum whatever the size: a large entry is kept, read back, and a change of
    one byte in it still seen."""
    write(repo, "big.txt", numbered(11000))
    commit_all(repo, "big")
    expected = blame.lookup(repo, "big.txt", cache=False)
    assert blame.lookup(repo, "big.txt") == expected
    location = Path(folder(repo)) / cache.entry_name(git(repo, "rev-parse", "HEAD")[:-1], "big.txt")
    good = location.read_bytes()
    header, _, payload = good.partition(b"\n")
    assert len(payload) > 256 << 10 and header.split(b" ")[4] == b"%08x" % checksum(payload)
    assert blame.lookup(repo, "big.txt") == expected  # read back
    location.write_bytes(good.replace(b"line 10999", b"line 10998"))
    assert blame.lookup(repo, "big.txt") == expected
    assert location.read_bytes() == good


def test_an_entry_of_the_previous_format_is_not_trusted(repo):
    """Format 2 checked large entries by CRC-32 and named them by the path's CRC-32 with
    `.v2`: such an entry is neither looked for under its old name nor, under the new
    name, taken for one of this format."""
    write(repo, "o.txt", numbered(6))
    commit_all(repo, "o")
    expected = blame.lookup(repo, "o.txt", cache=False)
    commit, held = git(repo, "rev-parse", "HEAD")[:-1], folder(repo)
    forged = ([("0" * 40, *("x",) * 6)], [0], [1], [0], ["o.txt"], ["forged"])
    cache.store(held, commit, "o.txt", forged)
    assert cache.load(held, commit, "o.txt")[0] == forged  # in this format, it would be
    location = Path(held) / cache.entry_name(commit, "o.txt")
    old_format = location.read_bytes().replace(cache.FORMAT, cache.FORMAT.replace(b" 3 ", b" 2 "))
    location.unlink()
    (Path(held) / f"{commit}-{zlib.crc32(b'o.txt'):08x}.v2").write_bytes(old_format)
    assert cache.load(held, commit, "o.txt") is None  # not looked for under its old name
    location.write_bytes(old_format)
    assert cache.load(held, commit, "o.txt") is None  # nor trusted under the new one
    assert not location.exists()
    assert blame.lookup(repo, "o.txt") == expected
    assert b"forged" not in location.read_bytes()


def test_git_gc_never_breaks_it(repo):
    write(repo, "g.txt", numbered(10))
    commit_all(repo, "g")
    for step in range(3):
        write(repo, "g.txt", (repo / "g.txt").read_text() + f"more {step}\n")
        commit_all(repo, f"more {step}")
        blame.lookup(repo, "g.txt")
    git(repo, "reset", "-q", "--hard", "HEAD~2")
    git(repo, "reflog", "expire", "--expire=now", "--all")
    git(repo, "gc", "-q", "--prune=now")
    assert_cached_is_git(repo, "g.txt", api=True)
    write(repo, "g.txt", (repo / "g.txt").read_text() + "again\n")
    commit_all(repo, "again")
    assert_cached_is_git(repo, "g.txt")


def test_no_cache_bypasses_it_and_the_cli_uses_it(repo):
    write(repo, "c.txt", numbered(5))
    commit_all(repo, "c")
    plain = obversa("why", "c.txt", "--no-cache", "--json", cwd=repo)
    assert plain.returncode == 0 and not Path(folder(repo)).exists()
    cached = obversa("why", "c.txt", "--json", cwd=repo)
    assert json.loads(cached.stdout) == json.loads(plain.stdout)
    assert kept(repo) == 1
    again = obversa("blame", "c.txt:2-3", cwd=repo)
    assert again.stdout == obversa("blame", "c.txt:2-3", "--no-cache", cwd=repo).stdout
    assert "--no-cache" in obversa("why", "--help", cwd=repo).stdout


def kept(repo: Path) -> int:
    """How many entries the cache holds once the CLI's detached writer (which keeps a
    blame after the command has exited) is done: waits up to 10 s for one to appear."""
    deadline = time.monotonic() + 10
    while True:
        names = [n for n in os.listdir(folder(repo))] if Path(folder(repo)).exists() else []
        if names and not [n for n in names if n.endswith(".tmp")] or time.monotonic() > deadline:
            return len(names)
        time.sleep(0.01)


def test_the_cli_starts_blame_first_and_keeps_it_after_answering(repo, tmp_path, monkeypatch):
    # `why FILE` with nothing kept: the program starts blame before its imports
    # (lookup/head_start.py), the lookup takes it over; the blame is kept once the answer is
    # out, by a process the command does not wait for. The answer is the uncached one.
    write(repo, "e.txt", numbered(7))
    commit_all(repo, "e")
    write(repo, "e.txt", numbered(7).replace("line 3\n", "three\n"))
    commit_all(repo, "three")
    log = log_git_calls(tmp_path, monkeypatch)
    # The program itself: `git obversa` would put git's own directory first on PATH.
    cold = subprocess.run(["git-obversa", "why", "e.txt"], cwd=repo, capture_output=True, text=True)
    assert cold.returncode == 0, cold.stderr
    calls = log.read_text().splitlines()
    assert calls[0] == "-C . blame --incremental -- e.txt"
    assert len([call for call in calls if " blame " in call]) == 1  # taken over, not rerun
    assert cold.stdout == obversa("why", "e.txt", "--no-cache", cwd=repo).stdout
    assert kept(repo) == 1
    assert_cached_is_git(repo, "e.txt", None)
    log.write_text("")
    warm = subprocess.run(["git-obversa", "why", "e.txt"], cwd=repo, capture_output=True, text=True)
    assert warm.stdout == cold.stdout
    assert " blame " not in log.read_text()
    # From a subdirectory, the file changed in the working tree: cold, then warm, each
    # the uncached answer (its checks, started first, name the file as given).
    write(repo, "sub/d.txt", numbered(4))
    commit_all(repo, "d")
    write(repo, "sub/d.txt", numbered(4).replace("line 2\n", "two, uncommitted\n"))
    expected = obversa("why", "d.txt", "--no-cache", cwd=repo / "sub").stdout
    assert "Not committed yet" in expected
    for _ in ("cold", "warm"):
        answer = subprocess.run(
            ["git-obversa", "why", "d.txt"], cwd=repo / "sub", capture_output=True
        )
        # Uncommitted lines are dated when blamed (git's clock): a second may pass.
        assert uncommitted_undated(answer.stdout.decode()) == uncommitted_undated(expected)
        kept(repo)


def uncommitted_undated(text: str) -> str:
    """TEXT (`why` output) with the date of the uncommitted lines' block taken out."""
    zero = "commit " + "0" * 40
    head, found, tail = text.partition(zero)
    return head + found + re.sub(r"(?m)^Date: .*$", "Date:", tail, count=1) if found else text


def test_the_early_blame_is_started_only_for_a_plain_why_of_a_file_not_kept(repo, monkeypatch):
    write(repo, "g.txt", numbered(5))
    commit_all(repo, "g")
    monkeypatch.chdir(repo)
    for words in (["why", "g.txt:2"], ["why", "--json"], ["blame", "g.txt"], ["why"]):
        head_start.start(words)
        assert head_start.claim(".", words[-1]) is None, words
    head_start.start(["why", "g.txt"])
    assert head_start.claim(".", "other.txt") is None  # another file's lookup leaves it
    found = blame.lookup(".", "g.txt", rev=None)  # takes it over: one blame
    assert head_start.claim(".", "g.txt") is None
    assert found == blame.lookup(".", "g.txt", rev=None, cache=False)
    settle(repo, "g.txt")
    head_start.start(["why", "g.txt"])  # now kept: the cache's checks start instead of blame
    assert head_start.claim(".", "g.txt") is None
    checks = head_start.claim_checks(".", "g.txt")
    assert checks is not None
    read, commit, waiting, proven = checks
    assert commit == git(repo, "rev-parse", "HEAD")[:-1]
    # The index shows g.txt holds the blob its entry records: config (core.bare) alone.
    assert proven == git(repo, "rev-parse", "HEAD:g.txt")[:-1]
    assert [status for status, _ in waiting()] == [0]
    assert head_start.claim_checks(".", "g.txt") is None


def test_a_warm_lookup_runs_no_blame(repo, tmp_path, monkeypatch):
    write(repo, "n.txt", numbered(40))
    commit_all(repo, "n")
    blame.lookup(repo, "n.txt", rev=None)
    settle(repo, "n.txt")
    log = log_git_calls(tmp_path, monkeypatch)
    completed = subprocess.run(["git-obversa", "why", "n.txt"], cwd=repo, capture_output=True)
    assert completed.returncode == 0
    # The configuration alone: no blame, no history, no rev-parse (HEAD is read from the
    # files), and no diff (git's index shows the file holds HEAD's blob).
    commands = [
        call.split()[2 if call.startswith("-C") else 0] for call in log.read_text().splitlines()
    ]
    assert commands == ["config"]
    # Changed, the working tree's diff runs beside it.
    write(repo, "n.txt", numbered(40) + "more\n")
    log.write_text("")
    subprocess.run(["git-obversa", "why", "n.txt"], cwd=repo, capture_output=True, check=True)
    assert "diff-index" in log.read_text()
    # One commit later, the cached blame of its parent is extended by its diff (git names
    # the commit it is kept under: rev-parse confirms the HEAD read).
    write(repo, "n.txt", numbered(40).replace("line 9\n", "nine\n"))
    commit_all(repo, "nine")
    log.write_text("")
    subprocess.run(["git-obversa", "why", "n.txt"], cwd=repo, capture_output=True, check=True)
    assert "blame" not in log.read_text().split()
    assert "diff-tree" in log.read_text().split()
    assert "rev-parse" in log.read_text().split()
    assert_cached_is_git(repo, "n.txt")


def test_configuration_that_changes_blame_sends_it_to_git(repo, started):
    write(repo, "m.txt", numbered(6))
    commit_all(repo, "m")
    write(repo, "m.txt", numbered(6).replace("line 2\n", "two\n"))
    reformat = commit_all(repo, "reformat")
    write(repo, ".git-blame-ignore-revs", reformat + "\n")
    git(repo, "config", "blame.ignoreRevsFile", ".git-blame-ignore-revs")
    assert blame.lookup(repo, "m.txt") == blame.lookup(repo, "m.txt", cache=False)
    git(repo, "config", "--unset", "blame.ignoreRevsFile")
    write(repo, ".mailmap", "Someone Else <else@example.com> <author@example.com>\n")
    found = blame.lookup(repo, "m.txt")
    assert {c["author"] for c in found.values()} == {"Someone Else"}
    assert found == blame.lookup(repo, "m.txt", cache=False)  # blame --incremental maps too
    # Of the working tree, with nothing kept: the blame started before the checks answers
    # (one blame, no second one once the configuration is known).
    started.clear()
    found = blame.lookup(repo, "m.txt", rev=None)
    assert started == ["blame", "cat-file", "rev-parse", "config", "--literal-pathspecs"]
    assert {c["author"] for c in found.values()} == {"Someone Else"}
    assert found == blame.lookup(repo, "m.txt", rev=None, cache=False, lines=[])
    assert not Path(folder(repo)).exists()


def test_bounded_in_size(repo):
    git(repo, "config", "obversa.blameCacheSize", "3k")
    write(repo, "s.txt", numbered(30))
    for step in range(12):
        write(repo, f"s{step}.txt", numbered(30, f" {step}"))
        commit_all(repo, f"s{step}")
        blame.lookup(repo, f"s{step}.txt")
    sizes = [entry.stat().st_size for entry in os.scandir(folder(repo))]
    assert 0 < len(sizes) < 12 and sum(sizes) <= 3 << 10
    assert_cached_is_git(repo, "s0.txt")


WORKER = """
import json, random, sys
from git_obversa.lookup import blame
repo, path, expected = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3]))
rng = random.Random(int(sys.argv[4]))
for _ in range(int(sys.argv[5])):
    rev = rng.choice(sorted(expected))
    lines = []
    blame.lookup(repo, path, rev=rev, lines=lines)
    if [sha for _, sha, _ in lines] != expected[rev]:
        sys.exit(f"wrong blame at {rev}")
"""


def test_concurrent_processes_read_and_write_it(repo, tmp_path):
    # Several processes look up random revisions at once, in a cache small enough that
    # they evict each other's entries while others read them.
    git(repo, "config", "obversa.blameCacheSize", "6k")
    text = numbered(40)
    for step in range(12):
        text = text.replace(f"line {step * 3}\n", f"changed {step}\n")
        write(repo, "p.txt", text)
        commit_all(repo, f"p{step}")
    revs = git(repo, "rev-list", "HEAD", "--", "p.txt").split()
    expected = {rev: [e[0] for e in porcelain(repo, "p.txt", rev)] for rev in revs}
    (tmp_path / "expected.json").write_text(json.dumps(expected))
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WORKER,
                str(repo),
                "p.txt",
                str(tmp_path / "expected.json"),
                str(seed),
                "15",
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed in range(4)
    ]
    for worker in workers:
        assert worker.wait(timeout=300) == 0, worker.stderr.read()
    leftovers = [name for name in os.listdir(folder(repo)) if name.endswith(".tmp")]
    assert leftovers == []
    assert_cached_is_git(repo, "p.txt", revs[4])


def test_the_api_takes_cache_too(repo):
    write(repo, "api.txt", numbered(3))
    commit_all(repo, "api")
    assert why(repo, "api.txt", cache=False) == why(repo, "api.txt")


def test_odd_names_line_ends_and_empty_files(repo):
    name = "dir with space/café ünï.txt"
    steps = ["a\r\nb\r\nc", "a\r\nb\r\nc\r\n", "", "x\ny", "x\ny\nz\n", "z\n"]
    for number, text in enumerate(steps):
        (repo / "dir with space").mkdir(exist_ok=True)
        (repo / name).write_bytes(text.encode())
        commit_all(repo, f"step {number}")
        assert_cached_is_git(repo, name, api=True)
    (repo / name).write_bytes(b"z\nnew\r\nlast")
    assert_cached_is_git(repo, name, None, api=True)


def test_sha256_repositories_and_linked_worktrees(tmp_path):
    repo = tmp_path / "sha256"
    repo.mkdir()
    git(repo, "init", "-q", "--object-format=sha256")
    write(repo, "h.txt", numbered(6))
    commit_all(repo, "h")
    write(repo, "h.txt", numbered(6).replace("line 2\n", "two\n"))
    commit_all(repo, "two")
    assert_cached_is_git(repo, "h.txt", "HEAD~1")
    assert_cached_is_git(repo, "h.txt", api=True)  # extended from HEAD~1
    write(repo, "h.txt", "top\n" + (repo / "h.txt").read_text())
    assert_cached_is_git(repo, "h.txt", None, api=True)  # 64 zeros for the new line
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "--detach", str(linked), "HEAD~1")
    assert_cached_is_git(linked, "h.txt", None)  # the entry kept by the main worktree
    assert folder(linked) == folder(repo)


def test_entry_names_hold_the_paths_checksum():
    for path in ("notes.md", "src/ünïcode/file name.py", "bad\udcff.txt", ""):
        held = checksum(path.encode("utf-8", "surrogateescape"))
        assert cache.entry_name("c0ffee", path) == f"c0ffee-{held:08x}.v3"


def test_a_range_that_misses_is_left_to_git_blame_L(repo):
    write(repo, "r.txt", numbered(9))
    commit_all(repo, "r")
    lines: list[tuple[int, str, str]] = []
    found = blame.lookup(repo, "r.txt", 3, 4, lines=lines)
    assert found == blame.lookup(repo, "r.txt", 3, 4, cache=False)
    assert [n for n, _, _ in lines] == [3, 4]
    assert not Path(folder(repo)).exists()  # nothing kept: git blame -L saw two lines
    blame.lookup(repo, "r.txt")  # the whole file is kept
    assert blame.lookup(repo, "r.txt", 3, 4) == found  # and now answers ranges too
    assert len(os.listdir(folder(repo))) == 1


def test_head_read_from_the_files_is_the_one_git_reads(repo, started):
    # A warm lookup reads HEAD from the files, no rev-parse. Each step below leaves the
    # cache holding a blame a wrong reading would find and answer with: the tests fail if
    # a stale packed ref, the wrong branch or the wrong worktree's HEAD is read.
    write(repo, "h.txt", numbered(8))
    first = commit_all(repo, "h")
    assert_cached_is_git(repo, "h.txt", None)
    started.clear()
    assert_cached_is_git(repo, "h.txt", None)
    assert started == ["config", "--literal-pathspecs"]  # warm: no rev-parse
    write(repo, "h.txt", numbered(8).replace("line 3\n", "three\n"))
    second = commit_all(repo, "three")
    git(repo, "pack-refs", "--all")  # main now only in packed-refs
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    assert_cached_is_git(repo, "h.txt", None)
    write(repo, "h.txt", "top\n" + (repo / "h.txt").read_text())
    commit_all(repo, "top")  # a loose main again, packed-refs still says SECOND
    assert_cached_is_git(repo, "h.txt", None)
    started.clear()
    assert_cached_is_git(repo, "h.txt", None)
    assert "rev-parse" not in started
    git(repo, "branch", "old", first)
    git(repo, "pack-refs", "--all")
    git(repo, "checkout", "-q", "old")
    assert_cached_is_git(repo, "h.txt", None)
    git(repo, "checkout", "-q", "--detach", second)
    assert_cached_is_git(repo, "h.txt", None)
    assert_cached_is_git(repo, "h.txt", "HEAD")
    # A linked worktree has a HEAD of its own; its branch lives in the common refs.
    linked = repo.parent / "linked"
    git(repo, "worktree", "add", "-q", "-b", "side", str(linked), "main")
    assert_cached_is_git(linked, "h.txt", None)
    write(linked, "h.txt", (linked / "h.txt").read_text() + "side\n")
    commit_all(linked, "side")
    assert_cached_is_git(linked, "h.txt", None)
    assert_cached_is_git(repo, "h.txt", None)  # still the detached SECOND here


def test_the_layout_read_from_the_files_is_gits_or_none(repo, tmp_path, monkeypatch):
    write(repo, "sub/deep/x.txt", "x\n")
    commit_all(repo, "x")
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "side", str(linked))
    asked = ["rev-parse", *head_start.located_command("HEAD")[1:]]
    for where in (repo, repo / "sub" / "deep", linked, linked / "sub"):
        read = location.located(where)
        assert read is not None, where
        by_git = blame._located_by_git(0, git(where, *asked).encode())
        assert [*read, refs.head_commit(read[1], read[0])] == by_git
    # Where git has to say: inside the git directory, a bare repository, a variable that
    # moves the repository.
    assert location.located(repo / ".git") is None
    assert location.located(repo / ".git" / "objects") is None
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    assert location.located(bare) is None
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))
    assert location.located(repo) is None


def test_configuration_that_moves_the_working_tree_is_asked_of_git(repo, tmp_path, started):
    # core.worktree puts the working tree elsewhere than the directory holding .git:
    # the blame of the working tree is then that directory's file, which git reads.
    write(repo, "c.txt", numbered(5))
    commit_all(repo, "c")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write(elsewhere, "c.txt", numbered(5).replace("line 1\n", "one, elsewhere\n"))
    assert_cached_is_git(repo, "c.txt", None)
    git(repo, "config", "core.worktree", str(elsewhere))
    started.clear()
    found = blame.lookup(repo, "c.txt", rev=None)
    assert "rev-parse" in started
    expected = porcelain(repo, "c.txt")
    assert sorted(found) == sorted({sha for sha, _, _, _ in expected})


def test_a_head_read_from_the_files_is_confirmed_by_git_before_anything_is_kept(repo):
    # A branch may hold an annotated tag's id (git will not write one there, but reads it
    # and blames the commit it points to): the blame is kept under the commit's id, never
    # under the tag's, which is what the files say.
    write(repo, "t.txt", numbered(4))
    commit = commit_all(repo, "t")
    git(repo, "tag", "-a", "-m", "a tag", "v1")
    tag = git(repo, "rev-parse", "v1")[:-1]
    (repo / ".git" / "refs" / "heads" / "main").write_text(tag + "\n")
    assert git(repo, "rev-parse", "HEAD^{commit}")[:-1] == commit
    assert_cached_is_git(repo, "t.txt", None)
    assert_cached_is_git(repo, "t.txt", None)
    names = os.listdir(folder(repo))
    assert not [name for name in names if name.startswith(tag)]
    assert [name for name in names if name.startswith(commit)]
