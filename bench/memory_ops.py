"""Median latency of memory `view`, `str_replace` and `create` on the Git adapter.

Four ways, side by side in one run, on scopes of 8, 64 and 256 files holding 1 MiB:

- in-process: one `open_git_memory` object (dulwich), warm;
- shared: two such objects on one scope taking turns, so each command first re-reads
  and re-validates the scope the other just wrote (the cost with several writers);
- exec: one long-lived `git obversa memory exec` process, a JSON line in, one out;
- baseline: git plumbing spawned per object, the way the original implementation works
  (per command: validate by reading the ref, root tree, metadata, listing and every blob
  with its own `git` process; per write: `hash-object` every file, `mktree` every tree,
  `update-ref`).

    python bench/memory_ops.py [--runs 41] [--baseline-runs 5]

`create` overwrites an existing file with new text of the same size (a full scope would
otherwise evict); `str_replace` changes a few bytes of one file; `view` reads one file.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from git_obversa import git  # noqa: E402
from git_obversa.memory.git_memory import open_git_memory, scope_digest, scope_ref  # noqa: E402

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
    memory = open_git_memory(str(repo), scope, limits_for(files))
    size = TOTAL_BYTES // files
    for index in range(files):
        result = memory.execute(
            {"command": "create", "path": file_path(index), "file_text": file_text(index, 0, size)}
        )
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=41)
    parser.add_argument("--baseline-runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
