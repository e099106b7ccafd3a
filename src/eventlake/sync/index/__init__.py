"""The dedupe index: every messageId a source synced, by received day, found again in a
fraction of a second after a year (``index_keys``: the keys' files and their Bloom filters;
``index_merge``: merging a day's small files; ``dedupe_index``: the index's folders and what a run
adds to them).

May import: the commit protocol (its stage and cut-offs) and eventlake's lower layers. Never the
pipeline or a maintenance operation (an import-linter contract).
"""
