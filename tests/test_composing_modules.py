"""`COMPOSING_MODULES` is part of the key under which a composition is kept ahead of the
commit: a change to any module it names makes a kept `composed` / `composed.plain`
stale. It must name every module the composing code runs, or an upgrade of one it
forgot would let the commit copy in a message the new code would not write."""

from __future__ import annotations

import ast
from pathlib import Path

import git_obversa
from git_obversa.record.composition import COMPOSING_MODULES

PACKAGE = Path(git_obversa.__file__).resolve().parent


def module_file(name: str) -> Path | None:
    """The file of module NAME of this package (a package's `__init__.py`), or None."""
    parts = name.split(".")
    if parts[0] != "git_obversa":
        return None
    path = PACKAGE.joinpath(*parts[1:])
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imported_files(path: Path) -> set[Path]:
    """The package's modules that the file PATH imports, anywhere in it (lazy imports in
    functions too). `from package import module` counts the module, not the package's
    `__init__.py`, which Python runs for every submodule anyway."""
    package = ".".join(("git_obversa", *path.relative_to(PACKAGE).parent.parts)).rstrip(".")
    found: set[Path] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            submodules = [f"{base}.{alias.name}" for alias in node.names]
            names = [name for name in submodules if module_file(name)] or [base]
        else:
            continue
        found.update(file for file in map(module_file, names) if file is not None)
    return found


def test_composing_modules_are_what_composition_imports():
    start = PACKAGE / "record" / "composition.py"
    seen, waiting = {start}, [start]
    while waiting:
        for file in imported_files(waiting.pop()) - seen:
            seen.add(file)
            waiting.append(file)
    imported = {file.relative_to(PACKAGE).as_posix() for file in seen}
    imported.discard("__init__.py")  # runs before anything of the package, at any import
    assert sorted(COMPOSING_MODULES) == sorted(imported)
