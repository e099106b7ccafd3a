"""``eventlake up``: the collector plus one long-lived engine (a Spark session that syncs every
``[sync] interval_seconds`` and serves SQL, :mod:`.engine`); ``eventlake engine``: that engine
alone; the alerts of every command that syncs (:mod:`.alerts`).

The package imports none of its modules: ``eventlake sync`` needs only :mod:`.alerts`, and
:mod:`.up` brings the collector, the web console and DuckDB (1.7 s of imports before a sync could
start its JVM)."""
