"""The commit-message format that carries reasoning (DESIGN.md, "Commit-message format").

    <subject>

    <the user's body, if any>

    Why:
    <reasoning, wrapped at 72 columns, no line starting with the comment character>

    <trailers the user or git added>
    Obversa-Record: <stage>

The block sits above the final trailer paragraph, whose `Obversa-Record` trailer marks it.
Commits written from a record with `git commit -F` (isolated stages, the original
implementation) carry a `## Why` section instead.
"""

WHY_HEADING = "Why:"
LEGACY_WHY_HEADING = "## Why"
RECORD_TRAILER = "Obversa-Record"
WRAP_COLUMNS = 72
