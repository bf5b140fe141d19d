"""The quick start's main job: `git obversa demo` end to end."""

import shutil
from pathlib import Path

from tests.gitutil import obversa


def test_demo_shows_memory_the_commit_why_and_the_line_lookup(tmp_path):
    completed = obversa("demo", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    out = completed.stdout
    # Memory was written and read back from a private ref that points at a tree.
    assert "Retry timeouts, never other errors." in out
    assert "tree refs/obversa/memory/v1/" in out
    # The hook wrote the captured reasoning into the commit body, marked by its trailer.
    assert "\nWhy:\n" in out.replace("  ", "")
    assert "Obversa-Record:" in out
    # `why` on a changed line leads back to that reasoning.
    why_part = " ".join(out[out.index("git obversa why client.py:5") :].split())
    assert "Retry timeouts when fetching" in why_part
    assert "Why: The API times out under load; a retry with a small bound rides out" in why_part


def test_demo_keep_leaves_the_repository(tmp_path):
    completed = obversa("demo", "--keep", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    kept = Path(completed.stdout.strip().splitlines()[-1].rsplit(" ", 1)[-1])
    try:
        assert (kept / ".git").is_dir()
        assert (kept / "client.py").read_text().startswith("def fetch")
    finally:
        shutil.rmtree(kept, ignore_errors=True)
