"""The engine's default rules that a text can need: stands in for loading all of them.

What it replaces: the secret engine (`secrets_engine`, betterleaks) reading its whole
default rule set, which its library does once in every process that scans (465 rules,
about 45 ms), where a capture scans a few kilobytes of new turns.

Why the two are equal: the engine tries a rule on a text only when one of the rule's
keywords occurs in it (ASCII case ignored; the long s and the Kelvin sign count as `s` and
`k`) or when the rule has no keywords, and its library does not decode (base64, hex) what
it scans, so no keyword can appear from a decoded part. `config_for(text)` gives a config
holding the default's own settings and the rules whose keywords occur in TEXT folded by
`str.casefold` (which folds at least those characters), with the components the composite
ones among them name: the engine finds there what its whole default finds.
tests/test_engine_rules.py holds the two equal over the secrets corpora and every rule's
keywords. A text longer than `LONGEST`, or one that needs most of the rules, gets None:
the whole default is then as cheap.

Where the rules come from: the engine's own `betterleaks config show toml` (the program in
its wheel), run once per installed engine and kept in
`$XDG_CACHE_HOME/git-obversa/betterleaks/<engine>/` (default `~/.cache`): the rendered
config and an index of it (each rule's id, keywords, components and place), checked by its
digest when read. Without that program, `tomllib` (Python 3.11) or a writable cache, every
text gets None.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import subprocess
from pathlib import Path

from git_obversa.lean import secrets_library

# Longer texts are scanned with the whole default: choosing rules costs about as much.
LONGEST = 200_000
INDEX_FORMAT = "git-obversa engine rules 1"

_state: dict = {}  # what this process has loaded: the index, the rules it has asked for
# A new name for every config written: the engine keeps a config it has read by its path.
_serials = itertools.count(1)


def config_for(text: str) -> str | None:
    """The path of a config holding the engine's default rules that TEXT can need, or None
    to scan it with the whole default."""
    if len(text) > LONGEST or _state.get("whole"):
        return None
    index = _index()
    if index is None:
        return None
    wanted = _wanted(index, text.casefold())
    chosen = _state.setdefault("chosen", set())
    if wanted <= chosen and "path" in _state:
        return _state["path"]
    chosen |= wanted
    if 2 * len(chosen) > len(index["rules"]):
        _state["whole"] = True
        return None
    try:
        _state["path"] = _write_config(index, chosen)
    except OSError:  # no room to write it: the whole default finds as much
        _state["whole"] = True
        return None
    return _state["path"]


def written(path: str) -> None:
    """PATH (from `config_for`) has been read by the engine, which keeps what it read:
    the file goes."""
    try:
        os.unlink(path)
    except OSError:
        pass


def _wanted(index: dict, folded: str) -> set[int]:
    """The positions of the rules FOLDED can need, components included."""
    trigrams = set(map("".join, zip(folded, folded[1:], folded[2:], strict=False)))
    wanted = set(index["always"])
    for keyword, positions in index["keywords"].items():
        if (len(keyword) < 3 or keyword[:3] in trigrams) and keyword in folded:
            wanted.update(positions)
    needs = list(wanted)
    while needs:
        for component in index["rules"][needs.pop()][1]:
            if component not in wanted:
                wanted.add(component)
                needs.append(component)
    return wanted


def _write_config(index: dict, chosen: set[int]) -> str:
    text = index["text"]
    parts = [text[: index["header"]]]
    parts += [text[index["rules"][i][2] : index["rules"][i][3]] for i in sorted(chosen)]
    scans = index["directory"] / "scans"
    scans.mkdir(exist_ok=True)
    path = scans / f"{os.getpid()}-{next(_serials)}.toml"
    path.write_text("".join(parts), encoding="utf-8")
    return str(path)


def _index() -> dict | None:
    if "index" not in _state:
        try:
            _state["index"] = _load_index()
        except (OSError, ValueError, KeyError, TypeError, subprocess.SubprocessError):
            _state["index"] = None
    return _state["index"]


def _load_index() -> dict | None:
    program = Path(secrets_library.program_path())
    # One folder per installed engine: its library and its program as installed.
    installed = [os.stat(path) for path in (secrets_library.library_path(), program)]
    name = "-".join(f"{status.st_size}.{status.st_mtime_ns}" for status in installed)
    directory = _cache() / "betterleaks" / hashlib.sha256(name.encode()).hexdigest()[:16]
    if not (directory / "index.json").exists():
        if not _build(directory, program):
            return None
    stored = json.loads((directory / "index.json").read_text(encoding="utf-8"))
    raw = (directory / "rules.toml").read_bytes()
    if stored["format"] != INDEX_FORMAT or stored["sha256"] != hashlib.sha256(raw).hexdigest():
        raise ValueError("the index does not describe its rules")
    return {
        **_indexed(stored["rules"]),
        "text": raw.decode(),
        "header": stored["header"],
        "rules": stored["rules"],
        "directory": directory,
    }


def _indexed(rules: list) -> dict:
    """Keyword -> the positions of the rules it admits, and the rules every text needs."""
    keywords: dict[str, list[int]] = {}
    always = []
    for position, (_, components, start, end, words) in enumerate(rules):
        if not all(isinstance(c, int) and 0 <= c < len(rules) for c in components):
            raise ValueError("a component out of range")
        if not isinstance(start, int) or not isinstance(end, int):
            raise ValueError("a rule without its place")
        if not words or not all(word.isascii() for word in words):
            always.append(position)  # no keywords, or some the engine folds otherwise
        for word in words:
            keywords.setdefault(word, []).append(position)
    return {"keywords": keywords, "always": always}


def _cache() -> Path:
    configured = os.environ.get("XDG_CACHE_HOME")
    return (Path(configured) if configured else Path.home() / ".cache") / "git-obversa"


def _build(directory: Path, program: Path) -> bool:
    """Render the engine's default rules with its own program and index them into
    DIRECTORY; False where that cannot be done here."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: the whole default is used
        return False
    shown = subprocess.run(
        [str(program), "config", "show", "toml"], capture_output=True, check=True, timeout=120
    )
    import re

    text = shown.stdout.decode()
    starts = [found.start() for found in re.finditer(r"(?m)^\[\[rules\]\]$", text)]
    if not starts:
        raise ValueError("the engine showed no rules")
    header = tomllib.loads(text[: starts[0]])
    if "rules" in header or len(tomllib.loads(text)["rules"]) != len(starts):
        raise ValueError("the engine's rules are not where they were looked for")
    places = list(zip(starts, [*starts[1:], len(text)], strict=True))
    rules, ids = [], {}
    for start, end in places:
        table = tomllib.loads(text[start:end])
        if list(table) != ["rules"] or len(table["rules"]) != 1:
            raise ValueError("a rule's part holds more than that rule")
        rule = table["rules"][0]
        ids[rule["id"]] = len(rules)
        rules.append(rule)
    index = [
        [
            rule["id"],
            [ids[component["id"]] for component in rule.get("components", [])],
            start,
            end,
            sorted({keyword.lower() for keyword in rule.get("keywords", [])}),
        ]
        for rule, (start, end) in zip(rules, places, strict=True)
    ]
    raw = text.encode()
    stored = {
        "format": INDEX_FORMAT,
        "sha256": hashlib.sha256(raw).hexdigest(),
        "header": starts[0],
        "rules": index,
    }
    directory.mkdir(parents=True, exist_ok=True)
    _replace(directory / "rules.toml", raw)
    _replace(directory / "index.json", json.dumps(stored).encode())  # last: it says done
    return True


def _replace(path: Path, data: bytes) -> None:
    """Write DATA to PATH whole or not at all (another process may build it too)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_bytes(data)
    os.replace(temporary, path)
