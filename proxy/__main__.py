"""``python -m proxy`` is the ``toolshim`` command."""

from .cli import main

raise SystemExit(main())
