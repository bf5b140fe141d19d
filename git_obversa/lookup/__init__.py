"""From a line to its reason: the blame engine and the `why` API above it."""
