"""Start-up stand-ins for standard modules, behind one door.

Each module here replaces a standard-library module (or part of one), or a dependency's
thin wrapper (`secrets_library`), that a one-shot command or a hook would otherwise import
only to pay its start-up. Each opens with what it stands in for, why, and which test holds
it equal to the version it replaces. Domain code imports these names and stays plain; it
carries no cost commentary.
"""
