"""Agent integrations: one module per agent (its transcripts and hook events), and the
adapters that let agents reach memory where they already are."""
