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
