"""``python -m bizmsg``: the same as the ``bizmsg`` command."""

from .cli import main

raise SystemExit(main())
