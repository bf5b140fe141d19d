"""Who wrote which lines, in the formats other tools read.

A commit made with captured agent turns can carry, opt-in (`git config obversa.attribution
git-ai,agent-trace`), two notes beside its why: a Git AI Standard v3.0.0 authorship log
under `refs/notes/ai` (`git_ai`) and an Agent Trace record under `refs/notes/agent-trace`
(`agent_trace`), both over the lines the commit added (`lines`). `emit` writes them after
the commit; `who` reads them back (ours or another tool's) for `why`.
"""

# Where the notes live (here, so reading them back costs no more than this module).
GIT_AI_REF = "refs/notes/ai"
AGENT_TRACE_REF = "refs/notes/agent-trace"
