"""Isolated stages: a job runs in its own worktree, commits there with its own reasoning,
and lands back."""
