"""The secret engine scanned with only the default rules a text can need finds what its
whole default finds (record/engine_rules.py), and our binding of its library reads what
its own Python wrapper reads (lean/secrets_library.py).

The reference is the engine's package itself: `betterleaks.scan_string(text)`, its own
wrapper with its embedded default rules. The texts are the secrets corpora: the engine's
line's own rule examples (`scanners.jsonl`), other scanners' examples (`external.jsonl`),
our token shapes and near misses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import betterleaks
import pytest

from git_obversa.lean import secrets_library
from git_obversa.record import engine_rules, secrets_engine

SECRETS = Path(__file__).resolve().parent.parent / "fixtures" / "secrets"


def _texts(name: str) -> list[str]:
    with (SECRETS / name).open() as lines:
        return [json.loads(line)["text"] for line in lines]


@cache
def corpus() -> tuple[list[str], list[str]]:
    """The engine's line's own rule examples, and every other text of the corpora."""
    others = _texts("external.jsonl")
    for line in (SECRETS / "tokens.tsv").read_text().splitlines()[1:]:
        _, secret, where = line.split("\t")
        others.append(where.replace("{}", secret))
    others += (SECRETS / "ordinary.txt").read_text().splitlines()
    return _texts("scanners.jsonl"), [text for text in others if text.strip()]


def samples() -> list[str]:
    """Texts of the corpora, each alone (a third of the engine's own rule examples) or a
    few together (all the others): each sample chooses its rules."""
    examples, others = corpus()
    return examples[::3] + ["\n".join(others[i : i + 8]) for i in range(0, len(others), 8)]


def every_text() -> list[str]:
    examples, others = corpus()
    return examples + others


def reference(text: str) -> set[tuple[str, str, int]]:
    """The engine's own wrapper, its whole default."""
    return {
        (found.rule_id, found.match.value or found.match.full, found.location.start_line)
        for found in betterleaks.scan_string(text)
    }


@pytest.fixture
def fresh_rules():
    """Each text chooses its own rules, as the first text of a process does."""
    engine_rules._state.clear()
    yield
    engine_rules._state.clear()


def test_the_rules_a_text_needs_find_what_the_whole_default_finds(fresh_rules):
    found = 0
    for text in samples():
        engine_rules._state.clear()
        config = engine_rules.config_for(text)
        assert config is not None, "the engine's rules could not be chosen"
        try:
            chosen = set(secrets_library.scan(text, config))
        finally:
            engine_rules.written(config)
        expected = reference(text)
        assert chosen == expected, text
        found += bool(expected)
    assert found > 700, "the corpora should give the engine plenty to find"


def test_a_process_scanning_many_texts_finds_the_same(fresh_rules):
    # One process, texts one after another: the rules chosen grow, then the whole default.
    for text in every_text()[::7]:
        assert set(secrets_engine._scan(text)) == reference(text), text
    assert engine_rules._state.get("whole"), "most rules chosen: the whole default is used"


def test_our_binding_reads_what_the_engines_wrapper_reads():
    for text in every_text()[::5]:
        assert set(secrets_library.scan(text)) == reference(text), text


def test_every_rule_is_chosen_by_each_of_its_keywords(fresh_rules):
    index = engine_rules._index()
    assert index is not None
    assert len(index["rules"]) > 400  # the engine's default, not a part of it
    for position, (rule_id, components, _, _, keywords) in enumerate(index["rules"]):
        for keyword in keywords:
            wanted = engine_rules._wanted(index, f"prose {keyword.upper()} prose".casefold())
            assert position in wanted, (rule_id, keyword)
            assert set(components) <= wanted, rule_id
    # Prose without keywords needs only the rules that have none.
    assert engine_rules._wanted(index, "zzz") == set(index["always"]) | {
        component for position in index["always"] for component in index["rules"][position][1]
    }


def test_a_damaged_index_is_not_trusted(fresh_rules):
    index = engine_rules._index()
    rules = index["directory"] / "rules.toml"
    kept = rules.read_bytes()
    try:
        # Rules lost from the file: its digest no longer matches, so the whole default scans.
        rules.write_bytes(kept[: len(kept) // 2])
        engine_rules._state.clear()
        assert engine_rules.config_for("token ghp_x") is None
        text = "export GITHUB_TOKEN=ghp_R2c9xQ7mB4nK8vL1pZ6tY3wE5sD0fG9hJ2kA"
        assert set(secrets_engine._scan(text)) == reference(text) != set()
    finally:
        rules.write_bytes(kept)


def test_the_index_is_built_once_per_installed_engine(tmp_path):
    # A fresh cache: the first scrubbing process builds it, the next one reads it.
    code = (
        "from git_obversa.record import engine_rules, scrub\n"
        "print(scrub.scrub('rotated ghp_R2c9xQ7mB4nK8vL1pZ6tY3wE5sD0fG9hJ2kA today'))\n"
        "print(engine_rules._state.get('path') is not None)\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        assert done.stdout == "rotated [redacted] today\nTrue\n", done.stderr
    built = list((tmp_path / "git-obversa" / "betterleaks").iterdir())
    assert len(built) == 1
    assert sorted(path.name for path in built[0].iterdir()) == ["index.json", "rules.toml", "scans"]
    assert list((built[0] / "scans").iterdir()) == []  # each config goes once read


def test_without_a_writable_cache_the_whole_default_scrubs(tmp_path):
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache folder would be")
    code = (
        "from git_obversa.record import engine_rules, scrub\n"
        "print(scrub.scrub('rotated ghp_R2c9xQ7mB4nK8vL1pZ6tY3wE5sD0fG9hJ2kA today'))\n"
        "print(engine_rules._state.get('index'))\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(blocked)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.stdout == "rotated [redacted] today\nNone\n", done.stderr
    assert done.stderr == ""
