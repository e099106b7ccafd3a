"""Where the Hive metastore is, and how a process reaches it (no JVM is started here).

``[catalog]`` (kind ``hive``) picks one of four modes:

- ``uri``: a running metastore service (``thrift://host:9083``): Spark connects with
  ``hive.metastore.uris``.
- ``jdbc``: the metastore's own PostgreSQL or MariaDB/MySQL database: every process opens its own
  connections, so any number share it. The JDBC driver jar goes on the driver's class path
  (:mod:`.jdbc`); the schema is created on first use with DataNucleus SchemaTool (:mod:`.schema`;
  ``autoCreateAll`` deadlocks on PostgreSQL).
- ``derby`` (default): embedded Derby in ``state_dir``. Derby admits one JVM, so while a project's
  metastore service runs (``eventlake up``, ``eventlake thrift`` or ``eventlake metastore`` start
  one, see :mod:`eventlake.jvm.service`) every eventlake process of the project connects to it
  through the thrift URI it published in ``state_dir/metastore/service.json`` (mode ``service``);
  with no service running, processes open Derby themselves and take turns through a lock
  (:mod:`.derby`).

:mod:`.access` puts these together: the :class:`~.access.MetastoreAccess` a Spark session or a
metastore service opens. Import the modules themselves.
"""
