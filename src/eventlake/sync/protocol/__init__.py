"""The commit protocol and the lake's durable state: how a run's output becomes visible exactly
once, whatever is killed when.

A run stages its files (``stage``), writes a manifest of what it will publish (``manifest``),
holds the source's lock and lease (``lock``, ``runner``), publishes and retires files
(``commit``, ``rewrite`` for partitions that already hold data), checkpoints the archive files it
handled (``ledger``, ``state``, ``damaged``), and records what it did (``report``, ``status``; the
reports' day merge in ``report_days``). ``cutoffs`` owns the retention and dedupe cut-offs.

May import: eventlake's lower layers (storage, layout, partitions, catalog, config, ...). Never
the pipeline, the dedupe index or a maintenance operation (an import-linter contract).
"""
