"""The ``eventlake`` command.

Commands live in modules of this package that register on the ``cli`` group of ``main``; each is
imported here.
"""

from eventlake.cli.main import cli, main

__all__ = ["cli", "main"]
