"""The local read-only web view: a page over one repository's files with a blame gutter
that shows each line's why, its reasoned log, its memory scopes and a corpus search."""
