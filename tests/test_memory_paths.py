"""The memory path rule has one specification, `validate_path`; every check that judges
many paths at once (memory/paths.py) gives the answer of applying it to each path."""

import random

from git_obversa.corpus.markdown import visible_markdown
from git_obversa.memory.paths import (
    are_markdown_names,
    are_stored_paths,
    is_stored_path,
    is_valid_file_path,
    validate_path,
)
from git_obversa.memory.port import ALLOWED_EXTENSIONS, MemoryFailure

PIECES = ["/", "a", "Z9", ".", "..", "_", "-", "%", "\\", " ", "\n", "\x00", "\x7f", "é"]
PIECES += ["\ud800", "\u2028", ".md", ".yml", ".MD", "x" * 70, "/memories"] + ["md"] * 6


class Text(str):
    """A str subclass: still a string to the rule."""


def accepted(path: object) -> bool:
    """The rule itself: PATH names a file below the root."""
    try:
        return validate_path(path) != "/memories"
    except MemoryFailure:
        return False


def storable(path: object) -> bool:
    name = path.rsplit("/", 1)[-1] if isinstance(path, str) else ""
    return accepted(path) and "." in name and name[name.rfind(".") :] in ALLOWED_EXTENSIONS


def random_path(rng: random.Random) -> str:
    tail = "".join(rng.choices(PIECES, k=rng.randint(0, 8)))
    return (
        "/memories/" if rng.random() < 0.9 else rng.choice(["/memorie", "", "memories/"])
    ) + tail


EDGES = [
    "/memories/" + "a" * 128 + ".md",
    "/memories/" + "a" * 126 + ".md",
    "/memories/b/" + "a" * 129,
    "/memories/" + "/".join(["abcdefg"] * 127) + ".md",  # 1,024 bytes and more
    "/memories/" + "/".join(["abcdefg"] * 126) + ".md",
    "/memories",
    "/memories/",
    "/memories/a.md/",
    "/memories//a.md",
    "/memories/./a.md",
    "/memories/../a.md",
    "/memories/.a.md",
    "/memories/a/.md",
    "/memories/a\\b.md",
    "/memories/a%2e.md",
    "/memories/é.md",
    "/memories/a\x00.md",
    "/memories/a.md\n/memories/b.md",
    Text("/memories/a.md"),
    None,
    3,
    b"/memories/a.md",
]


def test_each_path_check_is_validate_path():
    rng = random.Random(22)
    paths = EDGES + [random_path(rng) for _ in range(20000)]
    assert [is_valid_file_path(p) for p in paths] == [accepted(p) for p in paths]
    assert [is_stored_path(p) for p in paths] == [storable(p) for p in paths]
    assert sum(map(accepted, paths)) > 1000 and sum(map(storable, paths)) > 100


def test_paths_checked_at_once_get_the_verdict_of_checking_each():
    rng = random.Random(22)
    agreed = 0
    for _ in range(10000):
        paths = [rng.choice(EDGES) if rng.random() < 0.1 else random_path(rng)]
        paths += [random_path(rng) for _ in range(rng.choice([0, 1, 2, 4]))]
        if rng.random() < 0.6:  # mostly good paths, so that one bad one decides
            paths = [p for p in paths if storable(p)] + paths[: rng.randint(0, 1)]
        expected = all(map(storable, paths))
        assert are_stored_paths(paths) == expected, paths
        agreed += expected
    assert are_stored_paths([])
    assert 1000 < agreed < 9000  # both verdicts were tried


def test_a_directorys_names_checked_at_once_get_the_verdict_of_checking_each():
    # A corpus shows a directory's `.md` files whose names are segments of a valid path.
    def markdown_name(name: str) -> bool:
        return "/" not in name and accepted("/memories/" + name) and name.endswith(".md")

    rng = random.Random(22)
    names = ["a.md", "b-c_d.md", "9.md", ".md", "a.MD", "a.md.md", "x" * 125 + ".md", ""]
    names += ["x" * 126 + ".md", "a/b.md", "a.md/b.md", "é.md", "_a.md", "a b.md", "a.md\n"]
    agreed = 0
    for _ in range(20000):
        batch = [
            rng.choice(names) if rng.random() < 0.7 else "".join(rng.choices(PIECES, k=3))
            for _ in range(rng.choice([0, 1, 2, 3]))
        ]
        expected = all(map(markdown_name, batch))
        assert are_markdown_names(batch) == expected, batch
        if batch:
            assert visible_markdown(batch) == expected, batch
        agreed += expected
    assert 1000 < agreed < 19000  # both verdicts were tried
