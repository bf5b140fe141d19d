"""The package's imports run one way: down the layers of docs/architecture.md, no cycles.

Read with `ast`, so lazy imports inside functions count as much as those at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

import git_obversa

PACKAGE = Path(git_obversa.__file__).parent
# Bottom to top. A module may import its own subpackage and any layer below it.
LAYERS = [
    "lean",
    "repo",
    "memory",
    "corpus",
    "record",
    "lookup",
    "hooks",
    "stages",
    "sync",
    "agents",
    "web",
    "cli",
]


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Modules of the package that NAME imports (a package's own facade counts as itself)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # `from pkg import mod` imports the module; `from mod import name` the module.
            targets = [f"{base}.{alias.name}" for alias in node.names]
            targets = [t if t in modules else base for t in targets]
        else:
            continue
        found.update(t for t in targets if t in modules and t != name)
    return found


def _layer(module: str) -> str | None:
    """The layer of a module: its subpackage, or a root module's own name."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_every_subpackage_and_root_module_has_a_layer():
    unplaced = {_layer(m) for m in _modules() if _layer(m) not in LAYERS and m != "git_obversa"} - {
        "__main__"
    }
    assert not unplaced, f"add {sorted(unplaced)} to LAYERS and docs/architecture.md"


def test_imports_only_run_downward():
    upward = []
    for module, imported in _graph().items():
        if _layer(module) in (None, "__main__"):
            continue  # the public facade (lazy) and `python -m git_obversa` sit on top
        here = LAYERS.index(_layer(module))
        for target in imported:
            there = _layer(target)
            if there is None:
                # Only `__version__` comes from the facade, which imports nothing itself.
                continue
            if LAYERS.index(there) > here:
                upward.append(f"{module} -> {target}")
    assert not upward, "imports that run upward:\n" + "\n".join(sorted(upward))


def test_the_facade_imports_nothing_of_the_package_eagerly():
    # It may sit above every layer only because it imports them lazily, on first use.
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    eager = [
        ast.dump(node)
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        and (node.level or "git_obversa" in (node.module or ""))
        or isinstance(node, ast.Import)
        and any("git_obversa" in alias.name for alias in node.names)
    ]
    assert not eager


def test_no_import_cycles():
    graph = _graph()
    done: set[str] = set()
    cycles = []

    def visit(module: str, stack: list[str]) -> None:
        if module in stack:
            cycles.append(" -> ".join(stack[stack.index(module) :] + [module]))
            return
        if module in done:
            return
        for target in sorted(graph[module]):
            visit(target, stack + [module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_the_checks_see_a_real_upward_import_and_a_cycle(tmp_path):
    # The walk must find what it guards against, or the tests above could pass vacuously.
    modules = {"git_obversa.memory.a": tmp_path / "a.py", "git_obversa.cli.b": tmp_path / "b.py"}
    (tmp_path / "a.py").write_text("def f():\n    from git_obversa.cli import b\n")
    (tmp_path / "b.py").write_text("from git_obversa.memory import a\n")
    assert _imports("git_obversa.memory.a", modules["git_obversa.memory.a"], modules) == {
        "git_obversa.cli.b"
    }
    assert _imports("git_obversa.cli.b", modules["git_obversa.cli.b"], modules) == {
        "git_obversa.memory.a"
    }


# -- size: a module a reader can hold, functions a reader can follow --------------------------

MODULE_LINES, FUNCTION_LINES = 800, 120


def _oversized(paths: list[Path], root: Path) -> list[str]:
    """`file: N lines` for each module of PATHS over MODULE_LINES, and `file:function: N
    lines` for each function (or method, nested ones too) over FUNCTION_LINES; files are
    named relative to ROOT."""
    found = []
    for path in paths:
        text = path.read_text()
        shown = path.relative_to(root)
        lines = len(text.splitlines())
        if lines > MODULE_LINES:
            found.append(f"{shown}: {lines} lines")
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                length = node.end_lineno - start + 1
                if length > FUNCTION_LINES:
                    found.append(f"{shown}:{node.name}: {length} lines")
    return sorted(found)


def test_no_module_over_800_lines_and_no_function_over_120():
    found = _oversized(sorted(PACKAGE.rglob("*.py")), PACKAGE.parent)
    assert not found, "split these:\n" + "\n".join(found)


def test_the_size_check_sees_a_long_module_and_a_long_function(tmp_path):
    # Planted just over each limit, beside cases just at it, so the check cannot pass
    # vacuously nor fire on a limit-sized case.
    package = tmp_path / "pkg"
    package.mkdir()
    long_body = "".join(f"    x{n} = {n}\n" for n in range(FUNCTION_LINES))
    fitting_body = "".join(f"    x{n} = {n}\n" for n in range(FUNCTION_LINES - 1))
    (package / "long.py").write_text(f"def long():\n{long_body}\ndef fits():\n{fitting_body}")
    (package / "big.py").write_text("x = 1\n" * (MODULE_LINES + 1))
    (package / "full.py").write_text("x = 1\n" * MODULE_LINES)
    found = _oversized(sorted(package.glob("*.py")), tmp_path)
    assert found == [
        f"pkg/big.py: {MODULE_LINES + 1} lines",
        f"pkg/long.py:long: {FUNCTION_LINES + 1} lines",
    ]


# --- Git's own files are opened in repo/ only ------------------------------------------

# What git keeps under a git directory, by name: a path built or opened with one of these
# (or a ref name, or a lock) outside repo/ reads or writes Git's own files. Our own files
# there (`.git/obversa/...`, found with `git rev-parse --git-path`) are not among them.
GIT_FILE_NAMES = {
    "HEAD",
    "ORIG_HEAD",
    "FETCH_HEAD",
    "MERGE_HEAD",
    "index",
    "packed-refs",
    "objects",
    "refs",
    "logs",
    "gc.pid",
    "commondir",
    "shallow",
    "alternates",
}
GIT_FILE_PREFIXES = ("refs/", "objects/", "logs/")
# Calls that open, inspect, change or build a path.
PATH_CALLS = {
    "open",
    "fdopen",
    "join",
    "stat",
    "lstat",
    "listdir",
    "scandir",
    "walk",
    "unlink",
    "remove",
    "rename",
    "replace",
    "link",
    "makedirs",
    "mkdir",
    "utime",
    "exists",
    "isdir",
    "isfile",
    "lexists",
    "read_bytes",
    "read_text",
    "write_bytes",
    "write_text",
    "Path",
    "PurePath",
}


def _names_git_file(text: str) -> bool:
    """Whether the string TEXT, put into a path, names a file of git's."""
    return (
        text in GIT_FILE_NAMES
        or text.startswith(GIT_FILE_PREFIXES)
        or text.endswith(".lock")
        or any(part in GIT_FILE_NAMES for part in text.split("/")[1:])
    )


def _path_strings(node: ast.AST) -> list[str]:
    """The strings NODE puts into a path: itself, or those of the parts it is made of
    (arguments, operands, items, either branch), not what a condition compares."""
    if isinstance(node, ast.Constant):
        return [node.value] if isinstance(node.value, str) else []
    if isinstance(node, ast.Call):
        parts = [*node.args, *(keyword.value for keyword in node.keywords)]
    elif isinstance(node, ast.BinOp):
        parts = [node.left, node.right]
    elif isinstance(node, (ast.Tuple, ast.List)):
        parts = node.elts
    elif isinstance(node, ast.Starred):
        parts = [node.value]
    elif isinstance(node, ast.IfExp):
        parts = [node.body, node.orelse]
    elif isinstance(node, ast.JoinedStr):
        parts = [value for value in node.values if isinstance(value, ast.Constant)]
    else:
        return []
    return [text for part in parts for text in _path_strings(part)]


def _git_file_uses(path: Path) -> list[str]:
    """Where PATH builds or opens a path naming one of git's own files."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            function = node.func
            name = getattr(function, "attr", None) or getattr(function, "id", None)
            if name not in PATH_CALLS:
                continue
        elif not (isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.Add))):
            continue  # `directory / "index"`, `path + ".lock"` build paths too
        if any(_names_git_file(text) for text in _path_strings(node)):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return sorted(set(found))


def test_only_repo_opens_files_under_a_git_directory():
    outside = [p for m, p in _modules().items() if _layer(m) != "repo"]
    uses = [use for path in outside for use in _git_file_uses(path)]
    assert not uses, "git's own files used outside git_obversa/repo/:\n" + "\n".join(uses)


def test_the_git_file_check_sees_a_planted_read(tmp_path):
    planted = tmp_path / "git_obversa" / "lookup" / "planted.py"
    planted.parent.mkdir(parents=True)
    cases = [
        'open(os.path.join(git_dir, "HEAD"))',
        'Path(git_dir) / "index"',
        'os.stat(os.path.join(common, "refs/heads/main"))',
        'os.open(ref_path + ".lock", os.O_CREAT)',
        'os.path.exists(os.path.join(common_dir, "objects", "info", "alternates"))',
        'open(f"{git_dir}/HEAD")',
        'os.listdir(git_dir + "/refs/heads")',
        '(Path(top) / ".git" / "packed-refs").read_bytes()',
    ]
    global PACKAGE
    package, PACKAGE = PACKAGE, tmp_path / "git_obversa"
    try:
        for case in cases:
            planted.write_text(f"import os\nfrom pathlib import Path\n\n{case}\n")
            assert _git_file_uses(planted) == ["git_obversa/lookup/planted.py:4"], case
        planted.write_text('open(os.path.join(git_dir, "obversa", "turns.json"))\n')
        assert _git_file_uses(planted) == []  # our own file under .git is not git's
    finally:
        PACKAGE = package


# --- Private standard-library modules are imported in lean/ only -----------------------


def _private_imports(path: Path) -> list[str]:
    """The private standard-library modules (`_name`) PATH imports, where."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            continue
        for name in names:
            if name.startswith("_") and name != "__future__":
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {name}")
    return found


def test_private_standard_modules_are_imported_only_in_lean():
    outside = [p for m, p in _modules().items() if _layer(m) != "lean"]
    outside.append(PACKAGE.parent / "bin" / "git-obversa")
    uses = [use for path in outside for use in _private_imports(path)]
    assert not uses, "private imports outside git_obversa/lean/:\n" + "\n".join(uses)


def test_the_private_import_check_sees_a_planted_import(tmp_path):
    planted = tmp_path / "planted.py"
    global PACKAGE
    package, PACKAGE = PACKAGE, tmp_path / "git_obversa"
    try:
        for case, name in [
            ("import _thread", "_thread"),
            ("from _operator import itemgetter", "_operator"),
            ("def f():\n    from _json import make_scanner", "_json"),
            ("import os, _sha1 as sha", "_sha1"),
        ]:
            planted.write_text(f"from __future__ import annotations\n{case}\n")
            assert [use.rsplit(" ", 1)[1] for use in _private_imports(planted)] == [name]
        planted.write_text("from __future__ import annotations\nfrom . import _local\n")
        assert _private_imports(planted) == []
    finally:
        PACKAGE = package
