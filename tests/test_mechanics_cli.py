"""`git obversa ground|curate|consolidate` end to end, over a Git-backed scope."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

from git_obversa import MEMORY_WARNING
from tests.gitutil import git, obversa

FOLD = """\
import json, os, sys, time
request = json.load(sys.stdin)
name, barrier = sys.argv[1], sys.argv[2]
if barrier != "-":
    # Wait until every consolidate is inside its fold, so their writes really race.
    open(os.path.join(barrier, name), "w").close()
    deadline = time.time() + 30
    while len(os.listdir(barrier)) < 2 and time.time() < deadline:
        time.sleep(0.02)
parts = [request["prior"]] if request["prior"] else []
print("\\n".join(parts + [document["text"] for document in request["documents"]]))
"""


def memory(repo, *args):
    completed = obversa("memory", *args, cwd=repo)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def fold_command(tmp_path, name, barrier="-"):
    script = tmp_path / "fold.py"
    script.write_text(FOLD)
    return shlex.join([sys.executable, str(script), name, str(barrier)])


def test_ground_prints_the_warned_prompt_and_lists_missing_sources(repo):
    memory(repo, "create", "notes/b.md", "Beta")
    memory(repo, "create", "notes/a.md", "Alpha")
    grounded = obversa("ground", "--source", "notes", "--optional", "gone.md", cwd=repo)
    assert grounded.returncode == 0, grounded.stderr
    assert grounded.stdout == (
        f"{MEMORY_WARNING}\n\n## /memories/notes/a.md\n\nAlpha\n\n## /memories/notes/b.md\n\nBeta\n"
    )
    assert grounded.stderr == "git obversa ground: optional source missing: /memories/gone.md\n"
    limited = obversa("ground", "--source", "notes", "--max-total-chars", "3", "--json", cwd=repo)
    value = json.loads(limited.stdout)
    assert value["documents"] == [
        {"path": "/memories/notes/a.md", "text": "Alp", "truncated": True}
    ]
    assert value["missing"] == []


def test_ground_failures_are_one_line(repo):
    missing = obversa("ground", "--source", "gone.md", cwd=repo)
    assert missing.returncode == 1
    assert missing.stderr == (
        "git obversa ground: read_failed: Could not read memory at /memories/gone.md. "
        "NOT_FOUND: The memory path does not exist. (/memories/gone.md)\n"
    )
    bad_limit = obversa("ground", "--source", "a.md", "--max-files", "0", cwd=repo)
    assert bad_limit.returncode == 2  # a usage error, found while parsing
    assert bad_limit.stderr.splitlines()[-1] == (
        "git obversa ground: argument --max-files: '0' is not a whole number of 1 or more"
    )
    nothing = obversa("ground", cwd=repo)
    assert nothing.returncode == 1 and "--source" in nothing.stderr
    both = obversa("ground", "--source", "a.md", "--scope", "x", "--corpus", ".", cwd=repo)
    assert both.returncode == 2


def test_ground_from_a_corpus_and_a_named_scope(repo, tmp_path):
    corpus = tmp_path / "docs"
    (corpus / "sub").mkdir(parents=True)
    (corpus / "sub" / "guide.md").write_text("From the corpus.\n")
    from_corpus = obversa("ground", "--corpus", str(corpus), "--source", "sub", cwd=repo)
    assert from_corpus.stdout.endswith("## /memories/sub/guide.md\n\nFrom the corpus.\n\n")
    memory(repo, "create", "--scope", "agent-1", "a.md", "Scoped")
    scoped = obversa("ground", "--scope", "agent-1", "--source", "a.md", cwd=repo)
    assert scoped.stdout.endswith("## /memories/a.md\n\nScoped\n")
    assert obversa("ground", "--source", "a.md", cwd=repo).returncode == 1  # not in 'default'


def test_curate_runs_the_decide_command_once(repo, tmp_path):
    memory(repo, "create", "a.md", "Alpha")
    memory(repo, "create", "b.md", "Beta")
    seen = tmp_path / "seen.json"
    decide = (
        f"tee {shlex.quote(str(seen))} >/dev/null; "
        """echo '{"brief": "Use alpha.", "sources": ["/memories/a.md"]}'"""
    )
    curated = obversa(
        "curate", "--source", "a.md", "--source", "b.md", "--intent", "Plan.",
        "--decide-cmd", decide, cwd=repo,
    )  # fmt: skip
    assert curated.returncode == 0, curated.stderr
    assert curated.stdout == (
        f"{MEMORY_WARNING}\n\n## Curated brief\n\nUse alpha.\n\n## /memories/a.md\n\nAlpha\n"
    )
    request = json.loads(seen.read_text())
    assert request["intent"] == "Plan."
    assert [d["path"] for d in request["documents"]] == ["/memories/a.md", "/memories/b.md"]
    assert request["prompt"].startswith(MEMORY_WARNING)


def test_curate_falls_back_when_the_command_fails_or_talks_nonsense(repo):
    memory(repo, "create", "a.md", "Alpha")
    for command, reason in (("exit 3", "callback_failed"), ("echo not json", "invalid_decision")):
        curated = obversa("curate", "--source", "a.md", "--decide-cmd", command, "--json", cwd=repo)
        assert curated.returncode == 0
        result = json.loads(curated.stdout)
        assert result == {
            "mode": "grounded",
            "reason": reason,
            "prompt": f"{MEMORY_WARNING}\n\n## /memories/a.md\n\nAlpha",
        }
        assert f"git obversa curate: {reason}" in curated.stderr


def test_consolidate_writes_the_folded_text_once(repo, tmp_path):
    memory(repo, "create", "summary.md", "Earlier summary.")
    memory(repo, "create", "sessions/one.md", "Session one.")
    head = git(repo, "rev-parse", "HEAD")
    status = git(repo, "status", "--porcelain")
    done = obversa(
        "consolidate", "--target", "summary.md", "--source", "sessions",
        "--fold-cmd", fold_command(tmp_path, "solo"), cwd=repo,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "wrote /memories/summary.md (29 characters)\n"
    assert (
        memory(repo, "view", "summary.md", "--json").count("Earlier summary.\\nSession one.") == 1
    )
    assert git(repo, "rev-parse", "HEAD") == head
    assert git(repo, "status", "--porcelain") == status


def test_consolidate_reports_a_failing_or_empty_fold_and_writes_nothing(repo):
    memory(repo, "create", "in.md", "x")
    for command, expected in (
        ("exit 1", "callback_failed: The memory consolidation callback failed."),
        ("echo '   '", "invalid_callback_result: The consolidated text must contain 1 to"),
    ):
        failed = obversa(
            "consolidate", "--target", "s.md", "--source", "in.md", "--fold-cmd", command, cwd=repo
        )
        assert failed.returncode == 1
        assert expected in failed.stderr
    assert obversa("memory", "view", "s.md", cwd=repo).returncode == 1


def test_two_processes_consolidating_one_target_never_drop_each_other(repo, tmp_path):
    memory(repo, "create", "summary.md", "Start.")
    memory(repo, "create", "a.md", "From A.")
    memory(repo, "create", "b.md", "From B.")
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    racers = {
        name: subprocess.Popen(
            [
                "git",
                "obversa",
                "consolidate",
                "--target",
                "summary.md",
                "--source",
                f"{name}.md",
                "--fold-cmd",
                fold_command(tmp_path, name, barrier),
            ],
            cwd=repo,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for name in ("a", "b")
    }
    outcomes = {name: (p.wait(60), p.stderr.read()) for name, p in racers.items()}
    assert sorted(code for code, _ in outcomes.values()) == [0, 1], outcomes
    winner = next(name for name, (code, _) in outcomes.items() if code == 0)
    loser = "b" if winner == "a" else "a"
    assert "CONFLICT" in outcomes[loser][1]
    assert "Run it again" in outcomes[loser][1]
    summary = json.loads(memory(repo, "view", "summary.md", "--json"))["value"]["text"]
    assert summary == f"Start.\nFrom {winner.upper()}."  # the winner's text, whole

    again = obversa(
        "consolidate", "--target", "summary.md", "--source", f"{loser}.md",
        "--fold-cmd", fold_command(tmp_path, loser), cwd=repo,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    summary = json.loads(memory(repo, "view", "summary.md", "--json"))["value"]["text"]
    assert summary == f"Start.\nFrom {winner.upper()}.\nFrom {loser.upper()}."


def test_help_teaches_with_examples(repo):
    for command in ("ground", "curate", "consolidate"):
        helped = obversa(command, "--help", cwd=repo)
        assert helped.returncode == 0
        assert "example" in helped.stdout
