"""The commit hooks: what `prepare-commit-msg` and `post-commit` do, and installing the
shims into a repository."""
