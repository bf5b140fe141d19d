"""Memory across machines through any Git remote: the three-way merge of a scope, and the
transport that fetches, merges and pushes scope refs."""
