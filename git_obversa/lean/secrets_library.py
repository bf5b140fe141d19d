"""Stands in for the `betterleaks` package's Python wrapper: `scan(text, config)`.

What it replaces: `betterleaks.scan_string(text, config_path=...)`, the secret engine's
wrapper around its library (`libbetterleaks.so`, one C call and a JSON answer). Importing
that wrapper also imports `dataclasses`, `typing` and `platform` for its result types,
in every process that scrubs, where this module needs only `ctypes` and `json`.

It finds the package's folder without importing the package, loads the same library the
wrapper loads (`BETTERLEAKS_LIB_PATH` first, as the wrapper does), makes the same call and
reads the same answer, keeping of each finding what the scrubber uses: the rule id, the
secret (the match's value, else the whole match) and its first line.
tests/test_engine_rules.py holds it equal to `betterleaks.scan_string` on the secrets
corpora.
"""

import json
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ctypes

PACKAGE = "betterleaks"
# The library's file names the wrapper looks for, by system, in its order.
LIBRARIES = {
    "win32": ("libbetterleaks.dll", "betterleaks.dll"),
    "darwin": ("libbetterleaks.dylib", "libbetterleaks.so"),
}
LIBRARY = ("libbetterleaks.so",)  # elsewhere
# The engine's command-line program, in the package's bin/.
PROGRAM = "betterleaks.exe" if sys.platform == "win32" else "betterleaks"

_library: "ctypes.CDLL | None" = None


class LibraryError(Exception):
    """The library is not there, will not load, or refused a scan."""


def package_folder() -> str:
    """The installed `betterleaks` package's folder (not imported)."""
    from importlib.machinery import PathFinder

    spec = PathFinder.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise LibraryError(f"no {PACKAGE} package is installed")
    return list(spec.submodule_search_locations)[0]


def library_path() -> str:
    configured = os.environ.get("BETTERLEAKS_LIB_PATH")
    if configured and os.path.isfile(configured):
        return configured
    folder = package_folder()
    paths = [os.path.join(folder, name) for name in LIBRARIES.get(sys.platform, LIBRARY)]
    return next((path for path in paths if os.path.isfile(path)), paths[0])


def program_path() -> str:
    """The engine's own program, installed beside its library."""
    return os.path.join(package_folder(), "bin", PROGRAM)


def load() -> None:
    """Load the library now (once): a missing or broken one raises here."""
    global _library
    if _library is None:
        import ctypes

        try:
            library = ctypes.CDLL(library_path())
        except OSError as error:
            raise LibraryError(str(error)) from error
        library.ScanStringCGO.argtypes = [ctypes.c_char_p]
        library.ScanStringCGO.restype = ctypes.c_void_p
        library.ScanStringWithConfigCGO.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        library.ScanStringWithConfigCGO.restype = ctypes.c_void_p
        library.FreeMemory.argtypes = [ctypes.c_void_p]
        library.FreeMemory.restype = None
        _library = library


def scan(text: str, config: str | None = None) -> list[tuple[str, str, int]]:
    """(rule id, secret, first line) of each finding in TEXT, by the rules of the config
    file CONFIG (the engine's default without one)."""
    import ctypes

    load()
    content = text.encode("utf-8")
    if config:
        answer = _library.ScanStringWithConfigCGO(content, config.encode("utf-8"))
    else:
        answer = _library.ScanStringCGO(content)
    if not answer:
        raise LibraryError("the library gave no answer")
    try:
        raw = ctypes.cast(answer, ctypes.c_char_p).value
    finally:
        _library.FreeMemory(answer)
    reply = json.loads(raw.decode("utf-8")) if raw else {}
    if not reply.get("success"):
        raise LibraryError(reply.get("error") or "the scan failed")
    findings = []
    for found in reply.get("data") or []:
        match, location = found.get("match") or {}, found.get("location") or {}
        secret = match.get("value") or match.get("full") or ""
        findings.append((found.get("rule_id", ""), secret, location.get("start_line", 0)))
    return findings
