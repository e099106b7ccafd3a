"""The sync pipeline: archive files not yet synced -> typed, deduplicated Parquet pieces of each
table partition, with the quarantine beside them.

``selection`` picks the archive files a run reads, ``job`` runs it on Spark (or an injected
``Stager``): ``read`` and ``transform`` (a file's lines: ``columnar`` judges them on Arrow columns, the
per-message rules the rest: validate, flatten, name, type), ``pieces``,
``dedupe`` (against the run and the dedupe index), ``plan`` (the tables' schemas), ``write`` (the
Parquet files) and ``quarantine`` (what did not fit). The commit protocol publishes the result.

May import: the dedupe index, the commit protocol and eventlake's lower layers. Never a
maintenance operation (an import-linter contract; a replay passes its selection in).
"""
