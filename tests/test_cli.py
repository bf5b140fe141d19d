from tests.gitutil import obversa


def test_help_lists_every_command_group(tmp_path):
    completed = obversa("-h", cwd=tmp_path)
    assert completed.returncode == 0
    for name in ("memory", "record", "why", "install", "corpus", "demo"):
        assert name in completed.stdout


def test_unknown_command_is_a_usage_error(tmp_path):
    completed = obversa("frobnicate", cwd=tmp_path)
    assert completed.returncode == 2
    assert "invalid choice" in completed.stderr


def test_public_functions_are_not_shadowed_by_their_modules():
    # Importing a submodule first must not replace the function of the same name.
    import git_obversa.isolated  # noqa: F401
    import git_obversa.scrub  # noqa: F401
    import git_obversa.why  # noqa: F401
    from git_obversa import isolated, scrub, why

    assert callable(isolated) and callable(scrub) and callable(why)
    assert scrub("key sk-" + "a" * 32) == "key [redacted]"


def test_version(tmp_path):
    completed = obversa("--version", cwd=tmp_path)
    assert completed.returncode == 0
    assert completed.stdout.startswith("git-obversa 0.")
