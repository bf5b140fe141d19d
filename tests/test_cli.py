import argparse
import subprocess

from git_obversa.cli.parser import Parser, build_parser
from tests.gitutil import obversa


def test_help_lists_every_command_group(tmp_path):
    completed = obversa("-h", cwd=tmp_path)
    assert completed.returncode == 0
    for name in ("memory", "record", "why", "install", "corpus", "demo"):
        assert name in completed.stdout


def test_help_wraps_to_the_width_argparse_would_choose(monkeypatch):
    # The parser finds the terminal's width itself (argparse's own way imports shutil on
    # every command); help must wrap exactly as argparse's would, COLUMNS honoured.
    def why_help() -> str:
        return build_parser("why", ["f"]).parse_args(["why", "f"]).command_parser.format_help()

    helps = {}
    for columns in ("50", "120"):
        monkeypatch.setenv("COLUMNS", columns)
        ours = why_help()
        with monkeypatch.context() as argparse_own:
            argparse_own.setattr(Parser, "_get_formatter", argparse.ArgumentParser._get_formatter)
            assert why_help() == ours
        helps[columns] = ours
    assert helps["50"] != helps["120"]  # the width did count
    assert max(len(line) for line in helps["50"].split("examples:")[0].splitlines()) <= 50


def test_unknown_command_is_a_usage_error(tmp_path):
    completed = obversa("frobnicate", cwd=tmp_path)
    assert completed.returncode == 2
    assert "invalid choice" in completed.stderr


def test_public_functions_are_not_shadowed_by_their_modules():
    # Importing a submodule first must not replace the function of the same name.
    import git_obversa.lookup.why  # noqa: F401
    import git_obversa.record.scrub  # noqa: F401
    import git_obversa.stages.isolated  # noqa: F401
    from git_obversa import isolated, scrub, why

    assert callable(isolated) and callable(scrub) and callable(why)
    assert scrub("key sk-" + "a" * 32) == "key [redacted]"


def test_version(tmp_path):
    completed = obversa("--version", cwd=tmp_path)
    assert completed.returncode == 0
    assert completed.stdout.startswith("git-obversa 0.")


def test_a_reader_that_goes_away_is_not_a_traceback(repo):
    # About 45 KiB stored, 85 KiB once line-numbered: more than a pipe holds.
    text = "".join(f"line {n}\n" for n in range(5000))
    created = obversa("memory", "create", "/memories/big.md", "-", cwd=repo, input=text)
    assert created.returncode == 0, created.stderr
    piped = subprocess.run(
        "git obversa memory view /memories/big.md | head -1",
        shell=True,
        cwd=repo,
        capture_output=True,
        text=True,
    )
    assert piped.stdout == "     1\tline 0\n"
    assert piped.stderr == ""
