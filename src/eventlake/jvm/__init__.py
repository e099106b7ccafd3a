"""The JVM side of eventlake: the processes it runs from the pyspark wheel's jars, and how they
reach the Hive metastore.

- :mod:`~eventlake.jvm.session`: the one place a SparkSession is built (``spark_session``,
  ``owned_session``), with the metastore wired in;
- :mod:`~eventlake.jvm.metastore`: where the metastore is (embedded Derby, the project's service,
  a PostgreSQL/MariaDB database, a thrift URI) and how a process reaches it (``access``), the
  embedded Derby's lock and service file (``derby``), a JDBC database's driver and properties
  (``jdbc``) and its Hive tables (``schema``); no JVM starts there but the schema tool;
- :mod:`~eventlake.jvm.class_archive`: the driver JVM's class-data archive (AppCDS), made once per
  machine, mapped by every later start;
- :mod:`~eventlake.jvm.connectors`: Hadoop's S3 connector (``[spark] jars_dir``, ``fs.s3a.*``);
- :mod:`~eventlake.jvm.java`: Java, the wheel's jars, whether a JVM service's port answers;
- :mod:`~eventlake.jvm.service`: the project's metastore service (Hive's ``HiveMetaStore``);
- :mod:`~eventlake.jvm.thriftserver`: Spark's Thrift server (``eventlake thrift``).

It sits below :mod:`eventlake.catalog`, whose Hive back end runs on the sessions built here, and
the collector never imports it. Import the modules themselves: importing this package starts
nothing and imports no pyspark.
"""
