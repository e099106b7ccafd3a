"""The operations that change a lake after its syncs: ``compact`` (small files into large),
``retention`` (archive days and partitions past their age), ``erase`` (``users delete``),
``retype`` (``schema set-type``), ``replay`` (rebuild tables from the archive), ``adopt`` (a
Segment Data Lakes lake in place) and ``health`` (how many syncs in a row failed).

Each rewrites partitions through the commit protocol (``protocol.rewrite``) under the source's
lock. May import: the pipeline (a replay runs it), the dedupe index, the commit protocol and
eventlake's lower layers.
"""
