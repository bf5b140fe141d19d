"""Docs that run: every shell and Python block of README.md and docs/*.md is executed.

One test per document. Its blocks run in document order in one fresh repository (so files
and refs made by one block are there for the next), and a block's output is compared with
what the document says it prints. The conventions (languages, the `<!-- docs-test: ... -->`
markers, the normalization of hashes and dates) are below; `docs/architecture.md` points
here.

Markers, an HTML comment on the last non-blank line before a fence:

- `<!-- docs-test: skip (reason) -->`: the block is not run; the reason is required.
- `<!-- docs-test: output -->` before a `text` block: the expected output (stdout and
  stderr) of the previous run block. A line `...` matches any number of lines; `...`
  inside a line matches any text.
- `<!-- docs-test: setup` + shell lines + `-->`: run, unseen by readers, before the next
  block (to make the files an example talks about). `$CHECKOUT` is this checkout, for
  copying a fixture.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

SHELL = {"sh", "bash", "shell"}
RUN = SHELL | {"console", "python"}
NOT_RUN = {"text", "json", "jsonl", "yaml", "toml", "ini", "diff", "gitconfig"}
BLOCK_TIMEOUT = 120  # seconds; a hung example fails instead of stalling the suite

FENCE = re.compile(r"^(`{3,})\s*([\w-]*)\s*$")
MARKER = re.compile(r"^<!--\s*docs-test:\s*(skip|output|setup)\b(.*)$")


@dataclass
class Block:
    line: int  # 1-based line of the opening fence
    language: str
    text: str
    marker: str | None = None  # skip, output or setup (setup blocks are hidden comments)
    reason: str = ""


def parse(path: Path) -> list[Block]:
    """The fenced blocks of PATH and the hidden setup comments, in document order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    marker: tuple[str, str] | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        found = MARKER.match(line.strip())
        if found:
            kind, rest = found.group(1), found.group(2).strip()
            if kind == "setup":
                body = []
                index += 1
                while index < len(lines) and lines[index].strip() != "-->":
                    body.append(lines[index])
                    index += 1
                blocks.append(Block(index + 1, "sh", "\n".join(body) + "\n", "setup"))
                marker = None
            else:
                marker = (kind, rest.removesuffix("-->").strip())
            index += 1
            continue
        fence = FENCE.match(line)
        if fence:
            ticks, language = fence.group(1), fence.group(2).lower()
            start = index + 1
            body = []
            index += 1
            while index < len(lines) and lines[index].rstrip() != ticks:
                body.append(lines[index])
                index += 1
            kind, reason = marker if marker else (None, "")
            blocks.append(Block(start, language, "\n".join(body) + "\n", kind, reason))
            marker = None
        elif line.strip():
            marker = None  # a marker holds only for the fence right after it
        index += 1
    return blocks


def normalize(text: str) -> str:
    """What may differ between runs (hashes, dates, times) replaced by placeholders."""
    text = re.sub(r"\b(?=[0-9a-f]*[0-9])[0-9a-f]{7,64}\b", "<sha>", text)
    text = re.sub(
        r"\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2})?([+-]\d{2}:?\d{2}|Z)?)?", "<date>", text
    )
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def matches(expected: str, actual: str) -> bool:
    """EXPECTED (with `...` wildcards) against ACTUAL, both normalized."""
    pattern = []
    for line in normalize(expected).splitlines():
        if line.strip() == "...":
            pattern.append(r"(?:.*\n)*?")
        else:
            pattern.append(".*?".join(re.escape(part) for part in line.split("...")) + r"\n")
    return re.fullmatch("".join(pattern), normalize(actual) + "\n") is not None


def fresh_repository(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    home = tmp_path / "home"
    home.mkdir()
    config = home / ".gitconfig"
    config.write_text(
        "[user]\n\tname = Ada\n\temail = ada@example.com\n"
        "[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(
        HOME=str(home),
        GIT_CONFIG_GLOBAL=str(config),
        GIT_CONFIG_NOSYSTEM="1",
        PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
        LC_ALL="C.UTF-8",
        TZ="UTC",
        COLUMNS="100",
        CHECKOUT=str(ROOT),  # for setup comments that copy a fixture
    )
    env.pop("PAGER", None)
    work = tmp_path / "repo"
    work.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=work, env=env, check=True)
    return work, env


def run(command: list[str], script: str, work: Path, env: dict[str, str]) -> tuple[int, str]:
    completed = subprocess.run(
        command,
        input=script,
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=BLOCK_TIMEOUT,
    )
    return completed.returncode, completed.stdout


def console_commands(text: str) -> list[tuple[str, str]]:
    """(command, expected output) pairs of a console block."""
    pairs: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            pairs.append((line[2:], []))
        elif pairs:
            pairs[-1][1].append(line)
        elif line.strip():
            raise AssertionError(f"console block: output before the first '$ ' ({line!r})")
    return [(command, "\n".join(output)) for command, output in pairs]


def check_document(path: Path, tmp_path: Path) -> None:
    work, env = fresh_repository(tmp_path)
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    previous: tuple[Block, str] | None = None
    for block in parse(path):
        where = f"{name}:{block.line}"
        if block.marker == "skip":
            assert block.reason, f"{where}: say why the block cannot run: docs-test: skip (why)"
            continue
        if block.marker == "output":
            assert previous, f"{where}: an output block needs a run block before it"
            ran, output = previous
            assert matches(block.text, output), (
                f"{where}: the output of {name}:{ran.line} differs from the docs.\n"
                f"--- docs say\n{block.text}--- it printed\n{output}"
            )
            previous = None
            continue
        if not block.language:
            raise AssertionError(f"{where}: label the fence (sh, python, console, text ...)")
        if block.language in NOT_RUN:
            continue
        assert block.language in RUN, f"{where}: unknown fence language {block.language!r}"
        if block.language == "console":
            for command, expected in console_commands(block.text):
                status, output = run(["bash", "-o", "pipefail"], command, work, env)
                assert status == 0, f"{where}: `{command}` exited {status}:\n{output}"
                assert matches(expected, output), (
                    f"{where}: `{command}` printed what the docs do not say.\n"
                    f"--- docs say\n{expected}\n--- it printed\n{output}"
                )
            previous = None
            continue
        if block.language == "python":
            command = [sys.executable, "-"]
        else:
            command = ["bash", "-e", "-o", "pipefail"]
        status, output = run(command, block.text, work, env)
        assert status == 0, f"{where}: the block exited {status}:\n{output}"
        previous = (block, output) if block.marker != "setup" else None


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda path: path.name)
def test_document_runs(path: Path, tmp_path: Path) -> None:
    check_document(path, tmp_path)


def test_markers_are_understood(tmp_path: Path) -> None:
    """The harness itself: a wrong expected output and a failing block are caught."""
    document = tmp_path / "doc.md"
    document.write_text(
        "<!-- docs-test: setup\necho hidden > made.txt\n-->\n\n"
        "```sh\ncat made.txt\ngit rev-parse --is-inside-work-tree\n```\n\n"
        "<!-- docs-test: output -->\n```text\nhidden\ntrue\n```\n\n"
        "<!-- docs-test: skip (needs the network) -->\n```sh\nexit 3\n```\n\n"
        "```console\n$ printf 'a\\nb\\nc\\n'\na\n...\n```\n"
    )
    check_document_at(document, tmp_path / "ok")
    document.write_text("```sh\necho one\n```\n<!-- docs-test: output -->\n```text\ntwo\n```\n")
    with pytest.raises(AssertionError, match="differs from the docs"):
        check_document_at(document, tmp_path / "wrong")
    document.write_text("```python\nprint(undefined_name)\n```\n")
    with pytest.raises(AssertionError, match="NameError"):
        check_document_at(document, tmp_path / "name")
    document.write_text("```\ngit status\n```\n")
    with pytest.raises(AssertionError, match="label the fence"):
        check_document_at(document, tmp_path / "unlabelled")


def check_document_at(path: Path, tmp_path: Path) -> None:
    tmp_path.mkdir()
    check_document(path, tmp_path)


def test_normalize_hides_hashes_and_dates() -> None:
    assert normalize("commit 5f0c2d6e (Ada 2025-03-14 09:26:53+01:00)  \n") == (
        "commit <sha> (Ada <date>)"
    )
    assert matches("a ... c\n...\nend", "a b c\nx\ny\nend\n")
    assert not matches("a\nb", "a\nc")
