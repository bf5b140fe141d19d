"""A read-only Markdown corpus with passage search: the passage model, the corpus
(a directory or a Git tree) and its on-disk search index."""
