"""The bottom floor: Git's own files and processes.

Everything that spawns `git` or opens a file under a `.git` directory lives here: the
process runner, the object reader and writer, the index, HEAD and packed-refs readers,
lock files and reflogs. Nothing above this package opens a file under `.git` itself.
"""
