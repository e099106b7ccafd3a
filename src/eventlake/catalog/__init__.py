"""Catalog back ends: one interface (databases, tables, columns, partitions), a loader per kind."""

from eventlake.catalog.base import Catalog, Column, TableSpec, load_catalog

__all__ = ["Catalog", "Column", "TableSpec", "load_catalog"]
