"""The ``bizmsg`` command: ``send``, ``accounts list`` and ``numbers list`` against the service,
``demo`` and ``sandbox`` on the embedded sandbox.

``program.py`` parses the command line and turns what ended a command into its exit status
(``status.py``); each command has its module (``demo.py``, ``sandbox.py``, ``send.py`` with
``send_file.py`` for ``--file``, ``listing.py``), and ``output.py`` prints. ``import bizmsg``
imports none of them.
"""

from .program import main

__all__ = ["main"]
