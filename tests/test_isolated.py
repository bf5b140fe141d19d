"""Isolated stages (SPEC §8, scenarios 117–124) and `git obversa isolated -- CMD`."""

from __future__ import annotations

import logging
from pathlib import Path

from git_obversa import isolated, open_reasoning_record
from tests.gitutil import git, obversa
from tests.test_hook_e2e import without_record_ids

TOKEN = "sk-" + "a" * 32
NARRATION = [
    "Configured three retries ",
    "because calls fail in bursts of two.",
]


def blame_commit(repo: Path, path: str, line: int = 1) -> str:
    return git(repo, "blame", "--porcelain", "-L", f"{line},{line}", "--", path).split()[0]


def body(repo: Path, rev: str) -> str:
    return git(repo, "log", "-1", "--format=%B", rev)


def writes(name: str, text: str = "export const retries = 3;\n", status: str = "pass"):
    def job(workspace):
        Path(workspace["dir"], name).write_text(text)
        return {"status": status, "summary": f"wrote {name}"}

    return job


def test_117_job_runs_in_its_own_worktree_and_lands(repo):
    seen = {}

    def job(workspace):
        seen.update(workspace)
        Path(workspace["dir"], "out.ts").write_text("out\n")
        return {"status": "pass"}

    outcome = isolated(repo, job)
    assert outcome["status"] == "pass"
    assert Path(seen["dir"]).resolve() != repo.resolve()
    assert seen["branch"].startswith("lines/isolated-")
    assert (repo / "out.ts").read_text() == "out\n"
    assert not Path(seen["dir"]).exists()
    assert git(repo, "branch", "--list", "lines/*") == ""
    assert git(repo, "log", "-1", "--format=%P", "HEAD").count(" ") == 1  # a --no-ff merge
    assert body(repo, outcome["commit"]) == "chore(isolated): worktree changes\n\n"


def test_118_outside_a_repository_without_record_runs_in_place(tmp_path, caplog):
    seen = {}

    def job(workspace):
        seen.update(workspace)
        return {"status": "pass"}

    with caplog.at_level(logging.WARNING):
        outcome = isolated(tmp_path, job, label="build")
    assert outcome == {"status": "pass"}
    assert seen["dir"] == str(tmp_path)
    assert 'isolated("build") requested a worktree but' in caplog.text


def test_119_failing_job_lands_nothing(repo):
    outcome = isolated(repo, writes("bad.ts", status="fail"))
    assert outcome["status"] == "fail"
    assert not (repo / "bad.ts").exists()
    assert git(repo, "log", "--format=%s") == "initial\n"
    assert git(repo, "branch", "--list", "lines/*") == ""


def test_120_outside_a_repository_with_record_fails_without_running(tmp_path):
    ran = []
    record = open_reasoning_record("implement")
    outcome = isolated(tmp_path, lambda workspace: ran.append(1), label="implement", record=record)
    assert ran == []
    assert outcome["status"] == "fail"
    assert outcome["error"]["code"] == "CONFIG"
    assert outcome["summary"] == (
        f'isolated("implement") cannot record its reasoning: {tmp_path} is not a git repository'
    )


def test_121_record_and_a_job_that_commits_its_own_work(repo):
    def job(workspace):
        Path(workspace["dir"], "own.ts").write_text("own\n")
        git(workspace["dir"], "add", "own.ts")
        git(workspace["dir"], "commit", "-q", "-m", "my own commit")
        return {"status": "pass"}

    outcome = isolated(repo, job, label="implement", record=open_reasoning_record("implement"))
    assert outcome["status"] == "fail"
    assert outcome["error"]["code"] == "BODY"
    assert "the stage committed its own work" in outcome["summary"]
    assert not (repo / "own.ts").exists()
    assert outcome["discarded"][0]["branch"].startswith("lines/implement-")


def narrating_job(record, summary="wrote feature.ts", extra_turn=""):
    def job(workspace):
        for iteration in range(2):  # a loop under the stage: deeper paths are the stage's
            path = ["delivery", "implement", f"attempt-{iteration}"]
            record.observe({"kind": "engine:text", "path": path, "delta": NARRATION[iteration]})
        if extra_turn:
            record.observe(
                {"kind": "engine:thinking", "path": ["delivery", "implement"], "delta": extra_turn}
            )
        record.observe({"kind": "engine:tool", "path": ["delivery", "implement"], "delta": "ls"})
        Path(workspace["dir"], "feature.ts").write_text("export const retries = 3;\n")
        return {"status": "pass", "summary": summary}

    return job


def joined(request):
    text = "".join(turn["text"] for turn in request["captured"])
    return {"subject": f"feat(implement): retries {TOKEN}", "body": f"## Why\n\n{text}"}


def test_122_blame_names_the_fork_commit_whose_body_is_the_reasoning(repo):
    record = open_reasoning_record("implement", compose=joined)
    outcome = isolated(
        repo, narrating_job(record, extra_turn=f" Key {TOKEN}."), label="implement", record=record
    )
    assert outcome["status"] == "pass"
    fork = blame_commit(repo, "feature.ts")
    assert fork != git(repo, "rev-parse", "HEAD").strip()
    assert fork == outcome["commit"]
    message = body(repo, fork)
    assert message == (
        "feat(implement): retries [redacted]\n\nWhy:\n"
        "Configured three retries because calls fail in bursts of two. Key\n"
        "[redacted].\n\nObversa-Record: implement\n\n"
    )
    assert (
        git(repo, "interpret-trailers", "--parse", input=message) == "Obversa-Record: implement\n"
    )


def test_122_without_composer_the_floor_subject_is_scrubbed_but_the_outcome_is_not(repo):
    summary = f"Configured {TOKEN} for three retries because calls fail in bursts of two."
    record = open_reasoning_record("implement")
    outcome = isolated(
        repo, narrating_job(record, summary=summary), label="implement", record=record
    )
    assert outcome["summary"] == summary
    message = body(repo, blame_commit(repo, "feature.ts"))
    assert message.startswith(
        "record(implement): Configured [redacted] for three retries because calls fail in "
        "bursts of two.\n\nWhy:\nComposition left no message"
    )
    assert "2 captured turns" in message


def test_job_without_record_that_commits_its_own_work_lands_it(repo):
    def job(workspace):
        Path(workspace["dir"], "own.ts").write_text("own\n")
        git(workspace["dir"], "add", "own.ts")
        git(workspace["dir"], "commit", "-q", "-m", "the job's own commit")
        return {"status": "pass"}

    outcome = isolated(repo, job, label="own")
    assert outcome["status"] == "pass" and "discarded" not in outcome
    assert (repo / "own.ts").read_text() == "own\n"
    assert body(repo, outcome["commit"]) == "the job's own commit\n\n"
    assert git(repo, "log", "-1", "--format=%s", "HEAD").startswith("merge lines/own-")
    assert git(repo, "branch", "--list", "lines/*") == ""


def test_123_stage_that_changes_nothing_gets_no_commit_and_no_message(repo):
    calls = []

    class Record:
        stage = "implement"

        def message(self, outcome):
            calls.append("message")

        def committed(self, sha):
            calls.append("committed")

    outcome = isolated(repo, lambda workspace: {"status": "pass"}, record=Record())
    assert outcome == {"status": "pass"}
    assert calls == []
    assert git(repo, "log", "--format=%s") == "initial\n"


def test_124_land_back_conflict_fails_and_record_is_not_told(repo):
    committed = []
    record = open_reasoning_record("implement", compose=joined)
    record.committed = committed.append

    def job(workspace):
        # main moves on while the stage works on the same line
        (repo / "README.md").write_text("main's line\n")
        git(repo, "commit", "-q", "-am", "main edits README")
        record.observe({"kind": "engine:text", "path": ["implement"], "delta": "Reword."})
        Path(workspace["dir"], "README.md").write_text("stage's line\n")
        return {"status": "pass"}

    outcome = isolated(repo, job, label="implement", record=record)
    assert outcome["status"] == "fail"
    branch, fork = outcome["kept"]["branch"], outcome["kept"]["commit"]
    assert outcome["summary"] == (
        'isolated("implement") landed with a merge conflict; needs resolution (conflicts in '
        f"README.md; the merge was aborted, the stage is kept on branch {branch} at "
        f"{fork[:12]}; `git merge --no-ff {branch}` lands it to resolve it by hand)"
    )
    assert committed == []
    assert (repo / "README.md").read_text() == "main's line\n"
    assert git(repo, "status", "--porcelain") == ""
    # The stage's work is not lost: its branch still holds the fork commit.
    assert git(repo, "rev-parse", f"refs/heads/{branch}").strip() == fork
    assert git(repo, "show", f"{fork}:README.md") == "stage's line\n"


def test_a_landing_git_refuses_keeps_the_branch_and_says_why_without_claiming_a_conflict(repo):
    def job(workspace):
        (repo / "README.md").write_text("uncommitted edit in the main worktree\n")
        Path(workspace["dir"], "README.md").write_text("stage's line\n")
        return {"status": "pass"}

    outcome = isolated(repo, job, label="docs")
    assert outcome["status"] == "fail" and outcome["error"]["code"] == "LAND"
    branch, fork = outcome["kept"]["branch"], outcome["kept"]["commit"]
    assert "conflict" not in outcome["summary"]
    assert outcome["summary"] == (
        'isolated("docs") did not land: git merge refused: Your local changes to README.md '
        f"would be overwritten by merge; the stage is kept on branch {branch} at {fork[:12]}; "
        f"`git merge --no-ff {branch}` lands it once that is fixed"
    )
    assert (repo / "README.md").read_text() == "uncommitted edit in the main worktree\n"
    assert git(repo, "rev-parse", f"refs/heads/{branch}").strip() == fork
    (repo / "README.md").write_text("hello\n")
    git(repo, "merge", "--no-ff", "-q", "-m", "land", branch)  # the retry the summary names
    assert (repo / "README.md").read_text() == "stage's line\n"


def test_a_landing_never_aborts_a_merge_the_user_has_in_progress(repo):
    git(repo, "checkout", "-q", "-b", "side")
    (repo / "README.md").write_text("side\n")
    git(repo, "commit", "-q", "-am", "side")
    git(repo, "checkout", "-q", "main")
    (repo / "README.md").write_text("main\n")
    git(repo, "commit", "-q", "-am", "main")
    git(repo, "merge", "side", check=False)  # the user's own merge, stopped on a conflict
    outcome = isolated(repo, writes("new.ts"), label="late")
    assert outcome["status"] == "fail" and outcome["error"]["code"] == "LAND"
    assert "conflict" not in outcome["summary"].split("refused:")[0]
    assert git(repo, "rev-parse", "-q", "--verify", "MERGE_HEAD", check=False).strip()
    assert git(repo, "branch", "--list", outcome["kept"]["branch"]).strip()


def test_cli_outside_a_repository_refuses_in_one_line_and_runs_nothing(tmp_path):
    completed = obversa("isolated", "--", "sh", "-c", "touch ran", cwd=tmp_path)
    assert completed.returncode == 1
    assert completed.stderr.startswith("git obversa isolated: ")
    assert completed.stderr.count("\n") == 1 and "repository" in completed.stderr
    assert completed.stdout == ""
    assert not (tmp_path / "ran").exists()


def test_cli_command_captures_commits_through_the_hook_and_lands(repo):
    script = (
        "printf 'retries = 3\\n' > retry.cfg && "
        "git obversa record note --stage docs 'Three retries: the upstream fails in bursts of two.'"
    )
    completed = obversa("isolated", "--label", "docs", "--", "sh", "-c", script, cwd=repo)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("landed ")
    fork = blame_commit(repo, "retry.cfg")
    assert fork != git(repo, "rev-parse", "HEAD").strip()
    written = body(repo, fork)
    assert without_record_ids(written) == (
        "Three retries: the upstream fails in bursts of two\n\nWhy:\n"
        "Three retries: the upstream fails in bursts of two.\n\nObversa-Record: docs\n\n"
    )
    shown = obversa("record", "show", fork, cwd=repo)  # the stage's whole record, kept
    assert "Three retries: the upstream fails in bursts of two." in shown.stdout
    assert git(repo, "worktree", "list").count("\n") == 1
    assert git(repo, "branch", "--list", "lines/*") == ""


def test_cli_notes_default_to_the_label_as_their_stage(repo):
    script = "printf 'x\\n' > x.txt && git obversa record note 'Add x: the build needs it.'"
    completed = obversa("isolated", "--label", "build", "--", "sh", "-c", script, cwd=repo)
    assert completed.returncode == 0, completed.stderr
    message = body(repo, blame_commit(repo, "x.txt"))
    assert "Why:\nAdd x: the build needs it.\n" in message
    assert "Obversa-Record: build\n" in message
    # The label's stage stays inside the command: the repository's own default is untouched.
    assert git(repo, "config", "--get", "obversa.stage", check=False) == ""


def test_cli_failing_command_lands_nothing(repo):
    completed = obversa("isolated", "--", "sh", "-c", "touch junk && exit 4", cwd=repo)
    assert completed.returncode == 1
    assert completed.stderr == "git obversa isolated: sh exited 4; nothing landed\n"
    assert not (repo / "junk").exists()


def test_cli_git_failure_while_committing_is_one_line_and_cleans_up(repo):
    script = 'echo x > f && touch "$(git rev-parse --git-path index.lock)"'
    completed = obversa("isolated", "--", "sh", "-c", script, cwd=repo)
    assert completed.returncode == 1
    assert completed.stderr.startswith("git obversa isolated: ")
    assert len(completed.stderr.strip().splitlines()) == 1
    assert "index.lock" in completed.stderr
    assert git(repo, "worktree", "list").count("\n") == 1
    assert git(repo, "branch", "--list", "lines/*") == ""
    assert not (repo / "f").exists()
