"""How the ``bizmsg`` command ends: its exit statuses, and :class:`CommandError`, which any
command raises to end with one of them after a message on stderr."""

from __future__ import annotations

__all__ = ["EXIT_OK", "EXIT_ERROR", "EXIT_USAGE", "EXIT_REJECTED", "EXIT_UNKNOWN",
           "EXIT_INTERRUPTED", "EXIT_TERMINATED", "TOKEN_HINT", "CommandError"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_REJECTED = 3
EXIT_UNKNOWN = 4
EXIT_INTERRUPTED = 130
#: Stopped by SIGTERM (systemd, Docker, Kubernetes, ``timeout``): 128 + 15, as shells report a
#: process SIGTERM ended. ``send --file`` stops gracefully first, as for Ctrl-C.
EXIT_TERMINATED = 143

#: What to do about a token the service refused (401).
TOKEN_HINT = "check --token or $BIZMSG_TOKEN"


class CommandError(Exception):
    """Ends the command with exit ``status``, after its message on stderr."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
