"""Median latency of memory `view`, `str_replace` and `create` on the Git adapter.

Part 1, four ways, side by side in one run, on scopes of 8, 64 and 256 files holding 1 MiB:

- in-process: one `open_git_memory` object (the in-process store), warm;
- shared: two such objects on one scope taking turns, so each command first re-reads
  and re-validates the scope the other just wrote (the cost with several writers);
- exec: one long-lived `git obversa memory exec` process, a JSON line in, one out;
- baseline: git plumbing spawned per object, the way the original implementation works
  (per command: validate by reading the ref, root tree, metadata, listing and every blob
  with its own `git` process; per write: `hash-object` every file, `mktree` every tree,
  `update-ref`).

Part 2, at 256 files (issue 14, items 3 and 4), interleaved in one run:

- one write in-process (`str_replace`), split into its phases (load and validate, the
  engine, building the objects, moving the refs with history, the gc-safety check), next
  to the **file floor** (the same files written the way git writes them, by this
  process, with no logic: the write's 6 loose objects, their bytes again, 2 ref locks
  renamed into place, 1 reflog line), to the issue's **literal floor** (3 of those
  objects, the blob, the tree above it and the root tree, and 1 ref update) and to
  **git plumbing doing the same work** (`hash-object -w` ×2, `mktree` ×3,
  `commit-tree`, one `update-ref --stdin` moving both refs);
- the one-shot CLI (`git obversa memory view | str-replace | create`, one process per
  command, as an agent without MCP calls it) next to the interpreter's own start
  (`python -c pass`, the same interpreter and site) and the git floor the issue names
  (`git cat-file -p` for a view; `git cat-file -p` + `git update-ref` for a write). The
  CLI runs with its bytecode cached, as an installed package has it.

    python bench/memory_ops.py [--runs 41] [--baseline-runs 5] [--oneshot-runs 21]
                               [--part 1|2] [--write-dir DIR] [--oneshot-dir DIR]
                               [--before REV]

`--oneshot-runs 0` skips the one-shot part; `--oneshot-dir DIR` puts the one-shot part's
repositories under DIR; `--before REV` runs it all against REV too (bench/before.py).

`create` overwrites an existing file with new text of the same size (a full scope would
otherwise evict); `str_replace` changes a few bytes of one file; `view` reads one file.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import before  # noqa: E402  (bench/before.py, beside this script)

sys.path.insert(0, str(before.tree()))

from git_obversa.memory import engine, git_memory, gitstore  # noqa: E402
from git_obversa.memory.git_memory import open_git_memory, scope_digest, scope_ref  # noqa: E402

try:
    from git_obversa.memory import history_commits, ref_names
    from git_obversa.memory.scope_build import write_scope_tree
    from git_obversa.repo import git
    from git_obversa.repo import objects as repo_objects
except ImportError:  # --before with a tree from before issue 22: all of it was in gitstore
    from git_obversa import git

    history_commits = ref_names = repo_objects = gitstore
    write_scope_tree = git_memory.write_scope_tree

TOTAL_BYTES = 1048576


def file_path(index: int) -> str:
    return f"/memories/topic-{index // 16:02d}/note-{index % 16:02d}.md"


def file_text(index: int, version: int, size: int) -> str:
    tail = f"<v{version:06d}>\n"
    return f"{index:04d}" + "x" * (size - 4 - len(tail)) + tail


def limits_for(files: int) -> dict[str, int]:
    return {
        "max_files": files,
        "max_file_bytes": TOTAL_BYTES // files,
        "max_total_bytes": TOTAL_BYTES,
    }


def timed(run, command: dict) -> float:
    start = time.perf_counter()
    run(command)
    return (time.perf_counter() - start) * 1000


class Workload:
    """Commands cycling over the files, tracking each file's version so every one succeeds."""

    def __init__(self, files: int) -> None:
        self.files = files
        self.size = TOTAL_BYTES // files
        self.versions = [0] * files
        self.step = 0

    def next_index(self) -> int:
        self.step += 1
        return (self.step * 7) % self.files

    def view(self) -> dict:
        return {"command": "view", "path": file_path(self.next_index())}

    def str_replace(self) -> dict:
        index = self.next_index()
        old = f"<v{self.versions[index]:06d}>"
        self.versions[index] += 1
        new = f"<v{self.versions[index]:06d}>"
        return {"command": "str_replace", "path": file_path(index), "old_str": old, "new_str": new}

    def create(self) -> dict:
        index = self.next_index()
        self.versions[index] += 1
        text = file_text(index, self.versions[index], self.size)
        return {"command": "create", "path": file_path(index), "file_text": text}


class Baseline:
    """The original's way: one git process per object read or written."""

    def __init__(self, repo: Path, scope: str) -> None:
        self.repo = repo
        self.ref = scope_ref(scope)
        self.digest = scope_digest(scope)

    def git(self, *args: str, input: bytes | None = None) -> bytes:
        return git.run(list(args), self.repo, input=input or b"", isolated=True).stdout

    def load(self) -> tuple[dict, dict[str, str]]:
        symbolic = ["symbolic-ref", "--quiet", "--no-recurse", self.ref]
        git.run(symbolic, self.repo, input=b"", check=False, isolated=True)
        tree = self.git("rev-parse", "--verify", "--quiet", self.ref).decode().strip()
        self.git("cat-file", "-t", tree)
        self.git("ls-tree", "-z", tree)
        self.git("cat-file", "-s", f"{tree}:.obversa-memory.json")
        metadata = json.loads(self.git("cat-file", "blob", f"{tree}:.obversa-memory.json"))
        listing = self.git("ls-tree", "-r", "-t", "-z", tree, "--", "memories")
        texts = {}
        for record in listing.split(b"\0"):
            if not record:
                continue
            info, _, path = record.partition(b"\t")
            mode, kind, oid = info.decode().split()
            if kind == "blob":
                texts["/" + path.decode()] = self.git("cat-file", "blob", oid).decode()
        return metadata, texts

    def store(self, metadata: dict, texts: dict[str, str]) -> None:
        tree_entries: dict[str, list[str]] = {"memories": []}
        for path in sorted(texts):
            oid = self.git(
                "hash-object", "-w", "--no-filters", "--stdin", input=texts[path].encode()
            )
            parts = path[1:].split("/")
            for depth in range(1, len(parts)):
                directory = "/".join(parts[:depth])
                tree_entries.setdefault(directory, [])
            tree_entries["/".join(parts[:-1])].append(
                f"100644 blob {oid.decode().strip()}\t{parts[-1]}"
            )
        for directory in sorted(tree_entries, key=lambda d: -d.count("/")):
            body = "".join(entry + "\0" for entry in tree_entries[directory]).encode()
            oid = self.git("mktree", "-z", input=body).decode().strip()
            if directory != "memories":
                parent, _, name = directory.rpartition("/")
                tree_entries[parent].append(f"040000 tree {oid}\t{name}")
            else:
                files_tree = oid
        meta = self.git(
            "hash-object", "-w", "--no-filters", "--stdin",
            input=json.dumps(metadata, separators=(",", ":")).encode(),
        ).decode().strip()  # fmt: skip
        root = f"100644 blob {meta}\t.obversa-memory.json\x00040000 tree {files_tree}\tmemories\x00"
        new = self.git("mktree", "-z", input=root.encode()).decode().strip()
        old = self.git("rev-parse", self.ref).decode().strip()
        self.git("update-ref", self.ref, new, old)

    def execute(self, command: dict) -> None:
        metadata, texts = self.load()
        path = command["path"]
        if command["command"] == "view":
            assert path in texts
            return
        if command["command"] == "str_replace":
            texts[path] = texts[path].replace(command["old_str"], command["new_str"], 1)
        else:
            texts[path] = command["file_text"]
        metadata["nextWrite"] += 1
        for entry in metadata["entries"]:
            if entry["path"] == path:
                entry["byteLength"] = len(texts[path].encode())
                entry["written"] = metadata["nextWrite"]
        self.store(metadata, texts)


WAYS = ("in-process", "shared", "exec", "baseline")


def fill(repo: Path, files: int, scope: str) -> None:
    """The scope FILES `create` commands would leave (the same trees, metadata and
    stamps), stored in one write: each write replaces its two refs, so 256 of them would
    free 512 inodes just before the timing, and on ext4 without a journal every file
    created in the next ~30 s pays for skipping each inode freed (see docs/benchmarks.md,
    "A write at 256 files")."""
    size = TOTAL_BYTES // files
    digest = scope_digest(scope)
    with gitstore.open_store(str(repo)) as store:
        entries, blobs = {}, {}
        for index in range(files):
            path = file_path(index)
            text = file_text(index, 0, size).encode()
            entries[path] = engine.Entry(len(text), index + 1)
            blobs[path] = store.write_object("blob", text)
        tree = write_scope_tree(store, digest, entries, files, blobs)
        assert store.move_scope(digest, None, tree, f"create {file_path(files - 1)}")
    memory = open_git_memory(str(repo), scope, limits_for(files))
    result = memory.execute({"command": "view", "path": file_path(0)})
    assert result["ok"], result
    memory.close()


def measure(files: int, runs: int, baseline_runs: int) -> list[dict]:
    """Each way has its own scope of the same content, so one way never invalidates the
    cache of another; "shared" alternates two adapters on one scope, so every command
    first re-reads a scope the other has just changed (as with several writers)."""
    rows = []
    limits = limits_for(files)
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        git.run(["init", "-q", str(repo)], tmp)
        for way in WAYS:
            fill(repo, files, way)
        workloads = {way: Workload(files) for way in WAYS}
        memory = open_git_memory(str(repo), "in-process", limits)
        pair = [open_git_memory(str(repo), "shared", limits) for _ in range(2)]
        exec_process = subprocess.Popen(
            ["git", "obversa", "memory", "exec", "--scope", "exec", "--limits", json.dumps(limits)],
            cwd=repo,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

        def through_exec(command: dict) -> None:
            exec_process.stdin.write(json.dumps(command) + "\n")
            exec_process.stdin.flush()
            result = json.loads(exec_process.stdout.readline())
            assert result["ok"], result

        def in_process(command: dict) -> None:
            result = memory.execute(command)
            assert result["ok"], result

        def shared(command: dict) -> None:
            pair.reverse()
            result = pair[0].execute(command)
            assert result["ok"], result

        run_way = {
            "in-process": in_process,
            "shared": shared,
            "exec": through_exec,
            "baseline": Baseline(repo, "baseline").execute,
        }
        for operation in ("view", "str_replace", "create"):
            times: dict[str, list[float]] = {way: [] for way in WAYS}
            for run in range(runs):
                # Interleave the ways so load on the machine hits them alike.
                for way in WAYS:
                    if way != "baseline" or run < baseline_runs:
                        command = getattr(workloads[way], operation)()
                        times[way].append(timed(run_way[way], command))
            medians = {way: statistics.median(values) for way, values in times.items()}
            rows.append({"files": files, "operation": operation, **medians})
        exec_process.stdin.close()
        exec_process.wait()
        memory.close()
        for adapter in pair:
            adapter.close()
    return rows


# What a write does, each the exclusive time of the functions named (time spent in a
# function of another phase, called from one of these, counts for that phase).
PHASES = {
    "load": [(git_memory.GitMemory, "_load")],
    "engine": [(engine, "execute")],
    "encode": [(git_memory.GitMemory, "_write")],
    "history": [(gitstore.FileStore, "move_scope")],
    "object files": [(gitstore.FileStore, "_write")],
    "ref locks, reads, renames": [
        (gitstore.FileStore, name)
        for name in ("read_ref", "_lock_ref", "_swap", "_commit_ref", "_release_ref")
    ],
    "reflog": [(history_commits, "append_reflog")],
    "gc check": [(gitstore.FileStore, "_settle")],
}


class PhaseClock:
    """Wraps the steps of a write to time each phase of PHASES (bench only), by
    exclusive time: a phase's own time, less that of phases its functions call."""

    def __init__(self) -> None:
        self.spent = dict.fromkeys(PHASES, 0.0)
        self._originals = []
        self._stack: list[list[float]] = []  # per active call: time of the calls in it

    def wrap(self, owner, name: str, phase: str) -> None:
        original = getattr(owner, name)
        self._originals.append((owner, name, original))
        spent, stack = self.spent, self._stack

        def timed_call(*args, **kwargs):
            stack.append([0.0])
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - start
                nested = stack.pop()[0]
                spent[phase] += elapsed - nested
                if stack:
                    stack[-1][0] += elapsed

        setattr(owner, name, timed_call)

    def __enter__(self) -> PhaseClock:
        for phase, functions in PHASES.items():
            for owner, name in functions:
                self.wrap(owner, name, phase)
        return self

    def __exit__(self, *exc) -> None:
        for owner, name, original in reversed(self._originals):
            setattr(owner, name, original)


class ObjectRecorder:
    """Keeps the objects (kind, data) the in-process write stores, in order (bench only),
    so that the floors write the very same bytes: zlib's cost depends on them."""

    def __init__(self) -> None:
        self.objects: list[tuple[str, bytes]] = []

    def __enter__(self) -> ObjectRecorder:
        self._original = original = gitstore.FileStore.write_object
        objects = self.objects

        def write_object(store, kind: str, data: bytes) -> str:
            objects.append((kind, data))
            return original(store, kind, data)

        gitstore.FileStore.write_object = write_object
        return self

    def __exit__(self, *exc) -> None:
        gitstore.FileStore.write_object = self._original


def literal_objects(objects: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """Of a write's objects (the blob, the trees up to the root, the metadata blob, the
    history commit), the issue's three: the new blob, the tree above it, the root tree."""
    trees = [obj for obj in objects if obj[0] == "tree"]
    return [objects[0], trees[0], trees[-1]]


def file_floor(
    repo: Path,
    objects: list[tuple[str, bytes]],
    round_: int,
    refs: int = 2,
    reflog: bool = True,
) -> None:
    """The files git writes for a change, written directly: each of OBJECTS as a loose
    object (its bytes, then the round and REFS, for a new id) compressed at level 1
    (git's default for loose objects) into a temporary file linked into place and
    unlinked; REFS refs each locked, written and renamed; with REFLOG, one reflog line
    (git keeps none for a ref outside refs/heads unless asked to)."""
    git_dir = f"{repo}/.git/"  # paths as strings: no pathlib work in a floor
    ids = []
    for index, (kind, data) in enumerate(objects):
        data = b"%s %d %d" % (data, round_, refs)
        oid = gitstore.object_id(kind, data, "sha1")
        directory = f"{git_dir}objects/{oid[:2]}"
        temporary = f"{directory}/tmp_obj_{round_}_{refs}_{index}"
        try:
            handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        except FileNotFoundError:
            os.mkdir(directory)
            handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        os.write(handle, zlib.compress(b"%s %d\0" % (kind.encode(), len(data)) + data, 1))
        os.close(handle)
        os.link(temporary, f"{directory}/{oid[2:]}")
        os.unlink(temporary)
        ids.append(oid)
    for name in ("floor-scope", "floor-history")[:refs]:
        ref = f"{git_dir}refs/floor/{name}"
        handle = os.open(ref + ".lock", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        os.write(handle, ids[-1].encode() + b"\n")
        os.close(handle)
        os.rename(ref + ".lock", ref)
    if reflog:
        log = f"{git_dir}logs/refs/floor/floor-history"
        handle = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        os.write(handle, b"%s %s x <x> 0 +0000\tfloor\n" % (ids[0].encode(), ids[-1].encode()))
        os.close(handle)


def plumbing_write(repo: Path, scope: str, command: dict) -> None:
    """The same write through git plumbing, one process per step: the new blob and
    metadata (`hash-object -w`), the three trees on the path (`mktree`), the history
    commit (`commit-tree`), both refs in one `update-ref --stdin` (with a reflog line)."""
    ref = scope_ref(scope)
    history = ref_names.history_ref(scope_digest(scope))
    run = Baseline(repo, scope).git
    tree = run("rev-parse", ref).decode().strip()
    head = run("rev-parse", history).decode().strip()
    path = command["path"][len("/memories/") :]
    directory, name = path.rsplit("/", 1)
    text = run("cat-file", "blob", f"{tree}:memories/{path}").decode()
    text = text.replace(command["old_str"], command["new_str"], 1)
    blob = run("hash-object", "-w", "--stdin", input=text.encode()).decode().strip()
    metadata = json.loads(run("cat-file", "blob", f"{tree}:.obversa-memory.json"))
    metadata["nextWrite"] += 1
    for entry in metadata["entries"]:
        if entry["path"] == command["path"]:
            entry["written"] = metadata["nextWrite"]
    changed = json.dumps(metadata, separators=(",", ":")).encode()
    meta = run("hash-object", "-w", "--stdin", input=changed).decode().strip()

    def replaced(listing: bytes, entry: str, mode: str, kind: str, oid: str) -> bytes:
        lines = [
            line
            for line in listing.split(b"\0")
            if line and not line.endswith(b"\t" + entry.encode())
        ]
        lines.append(f"{mode} {kind} {oid}\t{entry}".encode())
        return b"\0".join(lines) + b"\0"

    inner = run("ls-tree", "-z", f"{tree}:memories/{directory}")
    inner_id = run("mktree", "-z", input=replaced(inner, name, "100644", "blob", blob))
    files = run("ls-tree", "-z", f"{tree}:memories")
    files_id = run(
        "mktree",
        "-z",
        input=replaced(files, directory, "040000", "tree", inner_id.decode().strip()),
    )
    files_id = files_id.decode().strip()
    root = f"100644 blob {meta}\t.obversa-memory.json\x00040000 tree {files_id}\tmemories\x00"
    new = run("mktree", "-z", input=root.encode()).decode().strip()
    commit = run("commit-tree", new, "-p", head, "-m", "str_replace", input=b"").decode().strip()
    run(
        "update-ref", "-m", "str_replace", "--stdin",
        input=f"update {ref} {new} {tree}\nupdate {history} {commit} {head}\n".encode(),
    )  # fmt: skip


def file_create_cost(repo: Path, label: str, count: int = 25) -> float:
    """Median µs to create one empty file now where REPO's loose objects go (one in each
    of COUNT `objects/xx` directories). On ext4 without a journal (this VM's disk) the
    kernel skips, for each new inode, every inode of its block group freed in the last
    ~30 s, so this moves with the files the whole machine has just deleted there. The
    files are kept (deleted with the repository, after the timing): a probe that deleted
    them would itself add to that cost."""
    spent = []
    for index in range(count):
        directory = f"{repo}/.git/objects/{index * 10:02x}"
        os.makedirs(directory, exist_ok=True)
        start = time.perf_counter()
        handle = os.open(f"{directory}/probe-{label}", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        os.close(handle)
        spent.append((time.perf_counter() - start) * 1e6)
    return statistics.median(spent)


def disk_costs(repo: Path, objects: list[tuple[str, bytes]], rounds: int = 25) -> dict:
    """Median µs of what the disk charges a write, each alone (run after every timing:
    the refs it replaces free inodes): a ref replaced as git does (a 41-byte lock renamed
    over a 41-byte ref), the same with the lock preallocated (`fallocate`, not done: see
    docs/benchmarks.md), an empty file renamed over an empty one; and OBJECTS (a write's
    six) written as loose objects by one thread, and split over two."""
    import _thread

    refs = f"{repo}/.git/refs/probe"
    os.makedirs(refs, exist_ok=True)
    spent: dict[str, list[float]] = {}

    def replace(name: str, way: str, content: bytes, preallocate: bool = False) -> None:
        ref = f"{refs}/{name}"
        if not os.path.exists(ref):
            with open(ref, "wb") as handle:
                handle.write(content)
        start = time.perf_counter()
        handle = os.open(ref + ".lock", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        if preallocate:
            os.posix_fallocate(handle, 0, len(content))
        os.write(handle, content)
        os.close(handle)
        os.rename(ref + ".lock", ref)
        spent.setdefault(way, []).append((time.perf_counter() - start) * 1e6)

    counter = iter(range(10**9))

    def write_objects(batch: list[tuple[str, bytes]]) -> None:
        for kind, data in batch:
            data = b"%s probe %d" % (data, next(counter))
            oid = gitstore.object_id(kind, data, "sha1")
            directory = f"{repo}/.git/objects/{oid[:2]}"
            os.makedirs(directory, exist_ok=True)
            handle = os.open(directory, os.O_WRONLY | repo_objects.O_TMPFILE, 0o444)
            os.write(handle, repo_objects.deflate(b"%s %d\0" % (kind.encode(), len(data)) + data))
            # As the store links it: linkat through /proc (a dir fd makes os.link use linkat).
            final = f"{directory}/{oid[2:]}"
            os.link(f"/proc/self/fd/{handle}", final, src_dir_fd=handle, follow_symlinks=True)
            os.close(handle)

    # A helper thread started once and woken for each round (starting one costs more
    # than what it would save).
    asked, done, stop = _thread.allocate_lock(), _thread.allocate_lock(), []
    asked.acquire()
    done.acquire()

    def helper() -> None:
        while True:
            asked.acquire()
            if stop:
                return
            write_objects(objects[::2])
            done.release()

    _thread.start_new_thread(helper, ())
    for index in range(rounds):
        replace(f"data{index % 2}", "ref replaced (41 bytes over 41)", b"1" * 40 + b"\n")
        replace(f"empty{index % 2}", "empty file renamed over an empty one", b"")
        replace(
            f"fallocated{index % 2}", "ref replaced, lock preallocated", b"2" * 40 + b"\n", True
        )
        if repo_objects.O_TMPFILE:
            start = time.perf_counter()
            write_objects(objects)
            spent.setdefault("six objects, one thread", []).append(
                (time.perf_counter() - start) * 1e6
            )
            start = time.perf_counter()
            asked.release()  # the helper writes every other object meanwhile
            write_objects(objects[1::2])
            done.acquire()
            spent.setdefault("six objects, two threads", []).append(
                (time.perf_counter() - start) * 1e6
            )
    stop.append(True)
    asked.release()
    return {way: statistics.median(values) for way, values in spent.items()}


def children_cpu() -> float:
    """CPU seconds (user + system) of the child processes waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure_writes(runs: int, tmp: str) -> dict:
    """Part 2a: one write at 256 files in-process, by phase, against its floors, in a
    repository made in the directory TMP (left there: the caller removes it after every
    timing, since removing thousands of files slows the file creation of the timings
    that follow, see `file_create_cost`)."""
    files = 256
    repo = Path(tmp) / "repo"
    git.run(["init", "-q", str(repo)], tmp)
    for scope in ("in-process", "plumbing"):
        fill(repo, files, scope)
    # The fill's thousands of new files are still being written back to the disk;
    # timing beside that write-back would measure it. Steady state: flush first.
    os.sync()
    (repo / ".git" / "refs" / "floor").mkdir()
    (repo / ".git" / "logs" / "refs" / "floor").mkdir(parents=True)
    memory = open_git_memory(str(repo), "in-process", limits_for(files))
    workloads = {way: Workload(files) for way in ("in-process", "plumbing")}
    for _ in range(3):  # warm: the scope read and validated once, as in a session
        assert memory.execute(workloads["in-process"].str_replace())["ok"]
    ways = ("in-process", "file floor", "literal floor", "git plumbing")
    times: dict[str, list[float]] = {way: [] for way in ways}
    cpu: dict[str, list[float]] = {way: [] for way in ways}

    def take(way: str, run, *args) -> None:
        """Time RUN(*ARGS): wall, and CPU of this process and the git processes it
        waited for."""
        cpu_start = time.process_time() + children_cpu()
        start = time.perf_counter()
        run(*args)
        times[way].append((time.perf_counter() - start) * 1000)
        cpu[way].append((time.process_time() + children_cpu() - cpu_start) * 1000)

    def write(command: dict) -> None:
        assert memory.execute(command)["ok"]

    probe_before = file_create_cost(repo, "before")
    with ObjectRecorder() as recorder:
        for round_ in range(runs):
            command = workloads["in-process"].str_replace()
            recorder.objects.clear()
            take("in-process", write, command)
            written = list(recorder.objects)  # the floors write these very bytes
            assert len(written) == 6, written  # blob, 2 trees, metadata, root, commit
            take("file floor", file_floor, repo, written, round_)
            take("literal floor", file_floor, repo, literal_objects(written), round_, 1, False)
            if round_ < max(3, runs // 4):
                command = workloads["plumbing"].str_replace()
                take("git plumbing", plumbing_write, repo, "plumbing", command)
    probe_after = file_create_cost(repo, "after")
    # The phases in rounds of their own: the wrappers that time them cost time too.
    wrapped = []
    with PhaseClock() as clock:
        for _ in range(runs):
            command = workloads["in-process"].str_replace()
            start = time.perf_counter()
            write(command)
            wrapped.append((time.perf_counter() - start) * 1000)
    memory.close()
    disk = disk_costs(repo, written)
    return {
        "medians": {way: statistics.median(values) for way, values in times.items()},
        "cpu": {way: statistics.median(values) for way, values in cpu.items()},
        "phases": {phase: clock.spent[phase] * 1000 / runs for phase in PHASES},
        "wrapped": statistics.mean(wrapped),
        "objects": [kind for kind, _ in written],
        "file create": (probe_before, probe_after),
        "disk": disk,
    }


def measure_oneshot(runs: int, directory: str | None = None) -> dict:
    """Part 2b: one process per command through `git obversa memory`, at 256 files, in
    repositories under DIRECTORY (default: the system's temporary directory)."""
    files = 256
    limits = json.dumps(limits_for(files))
    installs = ("now",)
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        repos, envs, work = {}, {}, {}
        for install in installs:
            repos[install] = Path(tmp) / install
            git.run(["init", "-q", str(repos[install])], tmp)
            fill(repos[install], files, "default")
            os.sync()  # as in measure_writes
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / f"pycache-{install}")
            envs[install], work[install] = env, Workload(files)
        tree = git.run(["rev-parse", scope_ref("default")], repos["now"]).stdout.strip()

        def cli(command: dict) -> list[str]:
            verb = command["command"].replace("_", "-")
            base = ["git", "obversa", "memory", verb, command["path"]]
            if verb == "str-replace":
                base += [command["old_str"], command["new_str"]]
            elif verb == "create":
                base += [command["file_text"]]
            return base + ["--limits", limits]

        def process(argv: list[str], install: str = "now") -> tuple[float, float]:
            """(wall ms, CPU ms of the process and of the git processes it waited for)."""
            usage_start = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            completed = subprocess.run(
                argv, cwd=repos[install], env=envs[install], capture_output=True
            )
            spent = (time.perf_counter() - start) * 1000
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            assert completed.returncode == 0, completed.stderr
            cpu = after.ru_utime - usage_start.ru_utime + after.ru_stime - usage_start.ru_stime
            return spent, cpu * 1000

        blob_path = f"{tree}:memories/topic-00/note-00.md"
        floors = {
            "python -c pass": [[sys.executable, "-c", "pass"]],
            "git cat-file": [["git", "cat-file", "-p", blob_path]],
            "git cat-file + update-ref": [
                ["git", "cat-file", "-p", blob_path],
                ["git", "update-ref", "refs/floor/oneshot", tree],
            ],
        }
        verbs = ("view", "str-replace", "create")
        names = [*verbs, *floors]
        times: dict[str, list[tuple[float, float]]] = {key: [] for key in names}
        for install in installs:
            process(cli(work[install].view()), install)  # untimed: fills the bytecode cache
        for _ in range(runs):
            for operation in ("view", "str_replace", "create"):
                for install in installs:
                    command = cli(getattr(work[install], operation)())
                    times[operation.replace("_", "-")].append(process(command, install))
            for name, commands in floors.items():
                spent = [process(argv) for argv in commands]
                times[name].append((sum(w for w, _ in spent), sum(c for _, c in spent)))
    return {
        name: (
            statistics.median(wall for wall, _ in values),
            statistics.median(cpu for _, cpu in values),
        )
        for name, values in times.items()
    }


def print_writes(writes: dict, directory: str) -> None:
    medians, cpu = writes["medians"], writes["cpu"]
    print(
        f"| write at 256 files (str_replace), under {directory} | wall ms | / file floor "
        "| / literal floor | CPU ms |"
    )
    print("|---|---|---|---|---|")
    for way in medians:
        print(
            f"| {way} | {medians[way]:.2f} | {medians[way] / medians['file floor']:.2f}× "
            f"| {medians[way] / medians['literal floor']:.2f}× | {cpu[way]:.2f} |"
        )
        before.figure(f"write at 256 files under {directory}, {way}, wall", medians[way])
        before.figure(f"write at 256 files under {directory}, {way}, CPU", cpu[way])
    print()
    first, last = writes["file create"]
    print(
        f"one empty file created among the objects under {directory}: {first:.0f} µs "
        f"before the rounds, {last:.0f} µs after (median of 25)"
    )
    print(f"objects a write stores: {', '.join(writes['objects'])}")
    print()
    print(f"| under {directory}, after the timings, each alone | median µs |")
    print("|---|---|")
    for way, cost in writes["disk"].items():
        print(f"| {way} | {cost:.0f} |")
    print()
    print(
        f"| in-process write under {directory}, by phase (exclusive; rounds of their own) "
        "| mean ms |"
    )
    print("|---|---|")
    for phase, spent in writes["phases"].items():
        print(f"| {phase} | {spent:.2f} |")
    print(f"| all phases | {sum(writes['phases'].values()):.2f} |")
    print(f"| the write, timed with the phases' wrappers | {writes['wrapped']:.2f} |")


def part_two(
    runs: int,
    oneshot_runs: int,
    write_dirs: list[str] | None = None,
    oneshot_dir: str | None = None,
) -> None:
    load_before = os.getloadavg()
    made = [tempfile.mkdtemp(dir=directory) for directory in [None, *(write_dirs or [])]]
    try:
        writes = measure_writes(runs, made[0])
        elsewhere = {
            directory: measure_writes(runs, tmp)
            for directory, tmp in zip(write_dirs or [], made[1:], strict=True)
        }
    finally:
        for tmp in made:
            shutil.rmtree(tmp, ignore_errors=True)
    oneshot = measure_oneshot(oneshot_runs, oneshot_dir) if oneshot_runs else None
    load_after = os.getloadavg()
    print()
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    print()
    print_writes(writes, tempfile.gettempdir())
    for directory, measured in elsewhere.items():
        print()
        print_writes(measured, directory)
    if oneshot is None:
        return
    print()
    where = oneshot_dir or tempfile.gettempdir()
    print(
        f"| one-shot CLI at 256 files, under {where} | wall ms | CPU ms "
        "| its git floor, wall / CPU | wall − python start | CPU − python start |"
    )
    print("|---|---|---|---|---|---|")
    start_wall, start_cpu = oneshot["python -c pass"]
    for verb, floor in (
        ("view", "git cat-file"),
        ("str-replace", "git cat-file + update-ref"),
        ("create", "git cat-file + update-ref"),
    ):
        wall, cpu = oneshot[verb]
        print(
            f"| {verb} | {wall:.1f} | {cpu:.1f} | {oneshot[floor][0]:.1f} / "
            f"{oneshot[floor][1]:.1f} | {wall - start_wall:.1f} | {cpu - start_cpu:.1f} |"
        )
        before.figure(f"one-shot {verb} at 256 files, wall", wall)
        before.figure(f"one-shot {verb} at 256 files, CPU", cpu)
    print(f"| python -c pass | {start_wall:.1f} | {start_cpu:.1f} | | | |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=41)
    parser.add_argument("--baseline-runs", type=int, default=5)
    parser.add_argument(
        "--oneshot-runs", type=int, default=21, help="0: part 2 times the in-process write only"
    )
    parser.add_argument("--part", type=int, choices=(1, 2), help="only part 1 or part 2")
    parser.add_argument(
        "--write-dir",
        action="append",
        metavar="DIR",
        help="part 2 also times the write in a repository under DIR (e.g. /dev/shm, where "
        "the disk costs nothing and what is left is the write's own work); repeatable",
    )
    parser.add_argument(
        "--oneshot-dir",
        metavar="DIR",
        help="part 2's one-shot repositories live under DIR (default: the system's temporary "
        "directory, where test runs on a shared machine free inodes that every new file then "
        "pays for on ext4 without a journal)",
    )
    parser.add_argument("--json", action="store_true")
    before.add_arguments(parser)
    args = parser.parse_args()
    if before.side_by_side(args):
        return 0
    if args.part == 2:
        part_two(args.runs, args.oneshot_runs, args.write_dir, args.oneshot_dir)
        return 0
    rows = []
    for files in (8, 64, 256):
        rows += measure(files, args.runs, args.baseline_runs)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        "| files | operation | in-process ms | shared ms | exec ms | baseline ms "
        "| baseline / in-process | baseline / shared |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['files']} | {row['operation']} | {row['in-process']:.2f} | "
            f"{row['shared']:.2f} | {row['exec']:.2f} | {row['baseline']:.1f} | "
            f"{row['baseline'] / row['in-process']:,.0f}× | "
            f"{row['baseline'] / row['shared']:,.0f}× |"
        )
        for way in ("in-process", "shared", "exec"):
            before.figure(f"{row['operation']} at {row['files']} files, {way}", row[way])
    if args.part is None:
        part_two(args.runs, args.oneshot_runs, args.write_dir, args.oneshot_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
