"""The JVM side of eventlake: the processes it runs from the pyspark wheel's jars, and how they
reach the Hive metastore.

- :mod:`~eventlake.jvm.session`: the one place a SparkSession is built (``spark_session``,
  ``owned_session``), with the metastore wired in;
- :mod:`~eventlake.jvm.metastore`: where the metastore is (embedded Derby, the project's service,
  a PostgreSQL/MariaDB database, a thrift URI) and how a process reaches it; no JVM starts there;
- :mod:`~eventlake.jvm.service`: the project's metastore service (Hive's ``HiveMetaStore``);
- :mod:`~eventlake.jvm.thriftserver`: Spark's Thrift server (``eventlake thrift``).

It sits below :mod:`eventlake.catalog`, whose Hive back end runs on the sessions built here, and
the collector never imports it. Import the modules themselves: importing this package starts
nothing and imports no pyspark.
"""
