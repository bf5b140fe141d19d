"""Hostile stored data and input: refused as UNSAFE_STORAGE (or one line), cheaply."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import zlib
from pathlib import Path

from git_obversa.memory.git_memory import open_git_memory, scope_digest, scope_ref
from tests.gitutil import git, obversa

MB = 1024 * 1024


def store_scope(repo: Path, scope: str, metadata: bytes, files: str) -> None:
    """Write a scope by hand (as another implementation, or an attacker, could)."""
    meta = git(repo, "hash-object", "-w", "--stdin", input=metadata.decode()).strip()
    tree = git(repo, "mktree", input=files).strip()
    listing = f"100644 blob {meta}\t.obversa-memory.json\n040000 tree {tree}\tmemories\n"
    root = git(repo, "mktree", input=listing).strip()
    git(repo, "update-ref", scope_ref(scope), root)


def metadata(scope: str, entries: list[tuple[str, int]], **extra) -> bytes:
    document = {
        "format": 1,
        "scopeDigest": scope_digest(scope),
        "nextWrite": len(entries),
        "totalBytes": sum(size for _, size in entries),
        "entries": [
            {"path": path, "byteLength": size, "written": index + 1}
            for index, (path, size) in enumerate(entries)
        ],
    }
    return json.dumps({**document, **extra}, separators=(",", ":")).encode()


def nested_scope(repo: Path, scope: str) -> None:
    nested = b"[" * 5000 + b"]" * 5000  # 10 KB: deeper than Python's parser goes
    document = metadata(scope, [])[:-1] + b',"x":' + nested + b"}"
    store_scope(repo, scope, document, "")


def test_deeply_nested_metadata_is_unsafe_storage_everywhere(repo):
    ok = open_git_memory(str(repo), "fine").execute(
        {"command": "create", "path": "/memories/a.md", "file_text": "a"}
    )
    assert ok["ok"]
    nested_scope(repo, "nested")
    result = open_git_memory(str(repo), "nested").execute({"command": "view", "path": "/memories"})
    assert result["error"] == {
        "code": "UNSAFE_STORAGE",
        "message": "Memory metadata is not valid JSON.",
    }
    listed = obversa("memory", "scopes", cwd=repo)
    assert listed.returncode == 0 and "Traceback" not in listed.stderr
    (line,) = [line for line in listed.stdout.splitlines() if "UNSAFE_STORAGE" in line]
    assert scope_digest("nested")[:12] in line
    assert "1 file" in listed.stdout  # the other scope is still listed
    exported = obversa("memory", "export", "--scope", "nested", cwd=repo)
    assert exported.returncode == 1 and "Traceback" not in exported.stderr
    assert exported.stderr.count("\n") == 1 and "UNSAFE_STORAGE" in exported.stderr
    assert "nested" in exported.stderr


def test_a_deeply_nested_export_file_is_refused_in_one_line(repo, tmp_path):
    hostile = tmp_path / "export.json"
    hostile.write_text('{"format": 1, "scope": "x", "files": ' + "[" * 100000 + "]" * 100000 + "}")
    imported = obversa("memory", "import", str(hostile), cwd=repo)
    assert imported.returncode == 1 and "Traceback" not in imported.stderr
    assert imported.stderr.count("\n") == 1 and "nested too deeply" in imported.stderr


def write_loose_zeros(repo: Path, size: int) -> str:
    """A blob of SIZE zero bytes, written loose in chunks (never whole in memory)."""
    header = b"blob %d\0" % size
    digest = hashlib.sha1(header)
    compressor = zlib.compressobj(1)
    chunk = bytes(MB)
    parts = [compressor.compress(header)]
    for _ in range(size // MB):
        digest.update(chunk)
        parts.append(compressor.compress(chunk))
    parts.append(compressor.flush())
    oid = digest.hexdigest()
    path = repo / ".git" / "objects" / oid[:2] / oid[2:]
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(b"".join(parts))
    return oid


def peak_memory_of(args: list[str], cwd: Path, chunks: tuple = ()) -> tuple[int, str]:
    """(peak resident MB, stdout) of a child process fed CHUNKS on stdin. The chunks are
    made one by one after the start: a child's peak counts what its parent held when
    it was forked (so compare with a baseline child started the same way)."""
    child = subprocess.Popen(
        args, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.append(child.stdout.read()))
    reader.start()
    try:
        for chunk in chunks:
            child.stdin.write(chunk() if callable(chunk) else chunk)
    except BrokenPipeError:
        pass
    child.stdin.close()
    _, _, usage = os.wait4(child.pid, 0)
    reader.join()
    child.returncode = 0  # reaped above
    return usage.ru_maxrss // 1024, b"".join(out).decode()


VIEW = """
import json, sys
from git_obversa import open_git_memory
memory = open_git_memory(".", "huge")
print(json.dumps(memory.execute({"command": "view", "path": "/memories/a.md"})))
"""


def test_a_huge_blob_is_refused_by_its_size_before_it_is_read(repo):
    size = 160 * MB
    blob = write_loose_zeros(repo, size)
    store_scope(
        repo, "huge", metadata("huge", [("/memories/a.md", 4)]), f"100644 blob {blob}\ta.md\n"
    )
    baseline, _ = peak_memory_of(
        [sys.executable, "-c", "import git_obversa.memory.git_memory"], repo
    )
    for layout in ("loose", "packed"):
        if layout == "packed":
            git(repo, "repack", "-a", "-d", "-q")
            assert not (repo / ".git" / "objects" / blob[:2] / blob[2:]).exists()
        peak, out = peak_memory_of([sys.executable, "-c", VIEW], repo)
        assert json.loads(out)["error"] == {
            "code": "UNSAFE_STORAGE",
            "message": "Memory blob exceeds its allowed size.",
        }, layout
        assert peak < baseline + 40, (layout, peak, baseline)  # not the 160 MB blob


def test_exec_refuses_an_overlong_line_without_holding_it(repo):
    start = b'{"command": "create", "path": "/memories/a.md", "file_text": "'
    good = b'{"command": "create", "path": "/memories/b.md", "file_text": "b"}\n'
    command = [sys.executable, "-m", "git_obversa", "memory", "exec"]
    body = [lambda: b"x" * MB] * 64  # a 64 MB line
    baseline, _ = peak_memory_of(command, repo, (good,))
    peak, out = peak_memory_of(command, repo, (start, *body, b'"}\n', good))
    first, second = (json.loads(text) for text in out.splitlines())
    assert first["error"]["code"] == "INVALID_COMMAND" and "exceeds" in first["error"]["message"]
    assert second["ok"]
    assert peak < baseline + 30, (peak, baseline)  # a few line caps, not the 64 MB line


def test_a_full_disk_is_one_line(repo):
    # A file-size limit stands in for a full disk: writes fail with EFBIG, as ENOSPC would.
    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    text = os.urandom(40000).hex()[:60000]
    completed = subprocess.run(
        ["git", "obversa", "memory", "create", "big.md", text],
        cwd=repo,
        capture_output=True,
        text=True,
        preexec_fn=limited,
    )
    assert completed.returncode == 1, completed.stderr
    assert completed.stderr.count("\n") == 1 and "Traceback" not in completed.stderr
    assert "disk" in completed.stderr
