"""The ``eventlake`` command.

Commands live in modules of this package that register on the ``cli`` group of ``main``; each is
imported here.
"""

from eventlake.cli import adopt as _adopt  # noqa: F401  (registers `eventlake adopt`)
from eventlake.cli import catalog as _catalog  # noqa: F401  (registers `eventlake catalog`)
from eventlake.cli import compact as _compact  # noqa: F401  (registers `eventlake compact`)
from eventlake.cli import importer as _importer  # noqa: F401  (registers `eventlake import`)
from eventlake.cli import replay as _replay  # noqa: F401  (registers `eventlake replay`)
from eventlake.cli import retention as _retention  # noqa: F401  (registers `eventlake retention`)
from eventlake.cli import schema as _schema  # noqa: F401  (registers `eventlake schema`)
from eventlake.cli import servers as _servers  # noqa: F401  (registers `eventlake metastore`, `thrift`)
from eventlake.cli import suppress as _suppress  # noqa: F401  (registers `eventlake suppress`)
from eventlake.cli import users as _users  # noqa: F401  (registers `eventlake users`)
from eventlake.cli.main import cli, main

__all__ = ["cli", "main"]
