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
