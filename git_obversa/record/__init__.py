"""The reasoning record: captured turns, scrubbing, composition, and the commit-message
format of the `Why:` block."""
