"""The AWS Glue Data Catalog, through boto3 (``pip install 'eventlake[glue]'``).

Tables are registered as Athena / EMR / Glue crawlers register Parquet tables (Hive Parquet
SerDe, ``EXTERNAL_TABLE``, string partition keys); partitions are looked up 1,000 per
BatchGetPartition call and only the missing ones created, 100 per BatchCreatePartition call (one
that exists by then is left alone); a column append reads the table and
calls UpdateTable only when columns are really missing (Glue keeps at most 100,000 versions of a
table, one per update), with the version it read, so concurrent writers never lose a column.

Spark here cannot read through Glue: with ``kind = "glue"`` the sync writes Parquet with Spark
and registers it here. Querying needs a Glue-aware engine: Athena, or Spark on EMR/Glue/Databricks
with the Glue Data Catalog as its Hive metastore and the lake root on S3.
"""

from __future__ import annotations

import base64
import copy
import re
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from eventlake.catalog.base import NOT_A_VIEW, Catalog, Column, ListedTable, TableSpec
from eventlake.config import CatalogSettings
from eventlake.errors import ConfigError, DependencyError, EventLakeError, PermissionsError
from eventlake.schema.storage_formats import FORMATS
from eventlake.schema.warehouse import View, view_sql

PARTITION_BATCH = 100  # BatchCreatePartition's limit
DELETE_BATCH = 25  # BatchDeletePartition's limit
PARTITION_GET_BATCH = 1000  # BatchGetPartition's limit
UPDATE_ATTEMPTS = 5
# TableInput accepts these fields of a GetTable answer
TABLE_INPUT_FIELDS = (
    "Name",
    "Description",
    "Owner",
    "LastAccessTime",
    "LastAnalyzedTime",
    "Retention",
    "StorageDescriptor",
    "PartitionKeys",
    "ViewOriginalText",
    "ViewExpandedText",
    "TableType",
    "Parameters",
    "TargetTable",
)


class GlueError(EventLakeError):
    """Glue answered with an error eventlake does not expect."""


# AWS's answer to an unknown access key, and a refusal in the query protocol's shape (moto's): not
# in Glue's model, so the client has no class for them
UNMODELED_DENIED_CODES = ("UnrecognizedClientException", "AccessDenied", "403")


def _answer(exc: Exception) -> str:
    """AWS's refusal on one line: its code and message (from the XML body a query-protocol
    answer carries, as moto's does), else the exception's text."""
    error = getattr(exc, "response", None) or {}
    details = error.get("Error", {}) if isinstance(error, dict) else {}
    text, code = str(details.get("Message") or exc), str(details.get("Code") or "")
    inner = re.search(r"<Code>(.*?)</Code>.*?<Message>(.*?)</Message>", text, re.S)
    if inner:
        code, text = inner[1], inner[2]
    return " ".join((f"{code}: {text}" if code else text).split())


def operation_name(method: str) -> str:
    """The Glue API operation (and IAM action) of a boto3 method.

    >>> operation_name("batch_create_partition")
    'BatchCreatePartition'
    """
    return "".join(word.title() for word in method.split("_"))


class GlueCatalog(Catalog):
    """``client`` is a boto3 Glue client; ``catalog_id`` the account id (empty: the caller's)."""

    def __init__(self, client: Any, catalog_id: str = "") -> None:
        self.client = client
        self.catalog_id = catalog_id
        # a policy without glue:BatchGetPartition (the README's before it was needed): create all
        self.batch_get_refused = False
        # a policy without glue:BatchUpdatePartition (the README's before it): one call a partition
        self.batch_update_refused = False

    @classmethod
    def from_settings(cls, catalog: CatalogSettings) -> GlueCatalog:
        try:
            import boto3
            from botocore.exceptions import NoRegionError
        except ImportError:
            raise DependencyError("the glue catalog needs boto3: pip install 'eventlake[glue]'") from None
        try:
            client = boto3.session.Session().client(
                "glue", region_name=catalog.region or None, endpoint_url=catalog.endpoint_url or None
            )
        except NoRegionError:
            raise ConfigError(
                "catalog.region", "is not set and AWS has no default region", 'set it, e.g. "us-east-1"'
            ) from None
        return cls(client, catalog.catalog_id)

    # -- calls --------------------------------------------------------------------------------

    def _translate(self, exc: Exception, doing: str, method: str, params: dict[str, Any]) -> EventLakeError:
        """A Glue or credentials error as eventlake's: refusals are :class:`PermissionsError`s naming
        the call, the resources and the IAM action to allow."""
        from botocore.exceptions import ClientError, NoCredentialsError, PartialCredentialsError

        denied = (self.client.exceptions.AccessDeniedException, NoCredentialsError, PartialCredentialsError)
        if isinstance(exc, denied) or (
            isinstance(exc, ClientError)
            and (
                exc.response.get("Error", {}).get("Code") in UNMODELED_DENIED_CODES
                or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 403
            )
        ):
            operation = operation_name(method)
            resources = self._resources(params)
            return PermissionsError(
                f"Glue refused {doing} ({operation}): {_answer(exc)}; allow glue:{operation} on "
                f"{', '.join(resources)} (see the IAM policy in docs/operations.md)",
                call=f"glue:{operation}", resource=resources[-1],
            )  # fmt: skip
        return GlueError(f"Glue failed {doing}: {exc}")

    def _resources(self, params: dict[str, Any]) -> list[str]:
        """The ARNs a call's parameters name: the catalog, the database, the table."""
        base = f"arn:aws:glue:{self.client.meta.region_name}:{params.get('CatalogId') or 'ACCOUNT'}"
        found = [f"{base}:catalog"]
        database = params.get("DatabaseName") or params.get("DatabaseInput", {}).get("Name")
        table = params.get("TableName") or params.get("TableInput", {}).get("Name")
        if database is None:
            database = params.get("Name")  # DeleteDatabase
        elif table is None:
            table = params.get("Name")  # GetTable, DeleteTable
        if database:
            found.append(f"{base}:database/{database}")
        if database and table:
            found.append(f"{base}:table/{database}/{table}")
        return found

    def _call(
        self, operation: str, doing: str, ignore: tuple[type[Exception], ...] = (), **params: Any
    ) -> Any:
        """``client.<operation>(**params)``; None when it raises one of ``ignore`` (exception
        classes of the client's model, e.g. ``self.client.exceptions.EntityNotFoundException``)."""
        if self.catalog_id:
            params["CatalogId"] = self.catalog_id
        try:
            return getattr(self.client, operation)(**params)
        except ignore:
            return None
        except EventLakeError:
            raise
        except Exception as exc:
            raise self._translate(exc, doing, operation, params) from exc

    def _get_table(self, database: str, table: str) -> dict[str, Any] | None:
        answer = self._call(
            "get_table",
            f"reading table {database}.{table}",
            ignore=(self.client.exceptions.EntityNotFoundException,),
            DatabaseName=database,
            Name=table,
        )
        return None if answer is None else answer["Table"]

    def _pages(self, operation: str, key: str, doing: str, **params: Any) -> list[dict[str, Any]]:
        if self.catalog_id:
            params["CatalogId"] = self.catalog_id
        items: list[dict[str, Any]] = []
        try:
            for page in self.client.get_paginator(operation).paginate(**params):
                items.extend(page[key])
        except self.client.exceptions.EntityNotFoundException:
            return []
        except Exception as exc:
            raise self._translate(exc, doing, operation, params) from exc
        return items

    # -- the interface ------------------------------------------------------------------------

    def ensure_database(self, name: str) -> None:
        """Create the database unless it exists. Whether it exists is asked with GetTables (which
        the sync needs anyway), so that a database an administrator created beforehand works with
        credentials that may not call CreateDatabase (as Segment Data Lakes documents)."""
        exists = self._call(
            "get_tables",
            f"looking up database {name}",
            ignore=(self.client.exceptions.EntityNotFoundException,),
            DatabaseName=name,
            MaxResults=1,
        )
        if exists is not None:
            return
        self._call(
            "create_database",
            f"creating database {name}",
            ignore=(self.client.exceptions.AlreadyExistsException,),
            DatabaseInput={"Name": name, "Description": "eventlake source database"},
        )

    def table_columns(self, database: str, table: str) -> tuple[Column, ...] | None:
        found = self._get_table(database, table)
        if found is None:
            return None
        return tuple((c["Name"], c["Type"]) for c in found.get("StorageDescriptor", {}).get("Columns", []))

    def list_tables(self, database: str) -> list[str]:
        return sorted(table.name for table in self.list_described(database))

    def list_described(self, database: str) -> list[ListedTable]:
        """GetTables: every table with its columns and location, 100 a call."""
        tables = self._pages(
            "get_tables", "TableList", f"listing tables of {database}", DatabaseName=database
        )
        return [
            ListedTable(
                t["Name"],
                tuple((c["Name"], c["Type"]) for c in t.get("StorageDescriptor", {}).get("Columns", [])),
                ""
                if t.get("TableType") == "VIRTUAL_VIEW"
                else t.get("StorageDescriptor", {}).get("Location") or "",
            )
            for t in tables
        ]

    def create_table(self, spec: TableSpec) -> None:
        self._call(
            "create_table",
            f"creating table {spec.qualified}",
            ignore=(self.client.exceptions.AlreadyExistsException,),
            DatabaseName=spec.database,
            TableInput={
                "Name": spec.name,
                "TableType": "EXTERNAL_TABLE",
                "Parameters": {"EXTERNAL": "TRUE", "classification": spec.format},
                "PartitionKeys": [{"Name": key, "Type": "string"} for key in spec.partition_keys],
                "StorageDescriptor": self._storage(spec, spec.columns, spec.location),
            },
        )

    def add_columns(self, database: str, table: str, columns: Sequence[Column]) -> None:
        def append_missing(found: dict[str, Any]) -> list[dict[str, str]] | None:
            have = found.get("StorageDescriptor", {}).get("Columns", [])
            names = {c["Name"] for c in have}
            missing = [{"Name": name, "Type": kind} for name, kind in columns if name not in names]
            return [*have, *missing] if missing else None

        self._update_columns(database, table, f"adding columns to {database}.{table}", append_missing)

    def set_column_type(self, database: str, table: str, column: str, kind: str) -> None:
        def retype(found: dict[str, Any]) -> list[dict[str, str]] | None:
            have = found.get("StorageDescriptor", {}).get("Columns", [])
            changed = [{**c, "Type": kind} if c["Name"] == column else c for c in have]
            return changed if changed != have else None

        self._update_columns(database, table, f"changing {column} of {database}.{table}", retype)

    def _update_columns(
        self,
        database: str,
        table: str,
        doing: str,
        change: Callable[[dict[str, Any]], list[dict[str, str]] | None],
    ) -> None:
        """UpdateTable with the columns ``change`` derives from the current table; none when it
        returns None (Glue keeps a version per update). Retried when someone updated it meanwhile."""
        for _ in range(UPDATE_ATTEMPTS):
            found = self._get_table(database, table)
            if found is None:
                raise GlueError(f"{doing}: no such table")
            columns = change(found)
            if columns is None:
                return  # nothing to change: no UpdateTable, no new table version
            table_input = {k: copy.deepcopy(found[k]) for k in TABLE_INPUT_FIELDS if k in found}
            table_input["StorageDescriptor"]["Columns"] = columns
            params: dict[str, Any] = {"DatabaseName": database, "TableInput": table_input}
            if found.get("VersionId"):
                params["VersionId"] = found["VersionId"]  # fails if someone updated it meanwhile
            answer = self._call(
                "update_table",
                doing,
                ignore=(self.client.exceptions.ConcurrentModificationException,),
                **params,
            )
            if answer is not None:
                return
        raise GlueError(f"{doing}: the table keeps changing concurrently")

    def add_partitions(self, spec: TableSpec, partitions: Sequence[tuple[str, ...]]) -> None:
        unique = sorted(set(partitions))
        registered = self._registered(spec, unique)
        new = [values for values in unique if values not in registered]
        for start in range(0, len(new), PARTITION_BATCH):
            batch = new[start : start + PARTITION_BATCH]
            answer = self._call(
                "batch_create_partition",
                f"adding partitions to {spec.qualified}",
                DatabaseName=spec.database,
                TableName=spec.name,
                PartitionInputList=[
                    {
                        "Values": list(values),
                        "StorageDescriptor": self._storage(
                            spec, spec.columns, spec.partition_location(values)
                        ),
                    }
                    for values in batch
                ],
            )
            failed = [
                e
                for e in answer.get("Errors", [])
                if e["ErrorDetail"]["ErrorCode"] != "AlreadyExistsException"
            ]
            if failed:
                first = failed[0]
                raise GlueError(
                    f"Glue failed adding {len(failed)} partitions to {spec.qualified}, e.g. "
                    f"{first['PartitionValues']}: {first['ErrorDetail'].get('ErrorMessage', '')}"
                )

    def drop_partitions(self, spec: TableSpec, partitions: Sequence[tuple[str, ...]]) -> None:
        ordered = sorted(set(partitions))
        for start in range(0, len(ordered), DELETE_BATCH):
            answer = self._call(
                "batch_delete_partition",
                f"dropping partitions of {spec.qualified}",
                ignore=(self.client.exceptions.EntityNotFoundException,),
                DatabaseName=spec.database,
                TableName=spec.name,
                PartitionsToDelete=[{"Values": list(v)} for v in ordered[start : start + DELETE_BATCH]],
            )
            failed = [
                e
                for e in (answer or {}).get("Errors", [])
                if e["ErrorDetail"]["ErrorCode"] != "EntityNotFoundException"
            ]
            if failed:
                first = failed[0]
                raise GlueError(
                    f"Glue failed dropping {len(failed)} partitions of {spec.qualified}, e.g. "
                    f"{first['PartitionValues']}: {first['ErrorDetail'].get('ErrorMessage', '')}"
                )

    def _registered(self, spec: TableSpec, partitions: Sequence[tuple[str, ...]]) -> set[tuple[str, ...]]:
        """Which of ``partitions`` the table has (BatchGetPartition). Keys Glue left unprocessed
        count as missing, and so do all when the credentials may not call BatchGetPartition
        (asked once): creating an existing partition again is harmless."""
        found: set[tuple[str, ...]] = set()
        for start in range(0, len(partitions), PARTITION_GET_BATCH):
            if self.batch_get_refused:
                return set()
            try:
                answer = self._call(
                    "batch_get_partition",
                    f"reading partitions of {spec.qualified}",
                    DatabaseName=spec.database,
                    TableName=spec.name,
                    PartitionsToGet=[
                        {"Values": list(values)} for values in partitions[start : start + PARTITION_GET_BATCH]
                    ],
                )
            except PermissionsError:
                self.batch_get_refused = True
                return set()
            found.update(tuple(p["Values"]) for p in answer.get("Partitions", []))
        return found

    def set_partition_location(
        self,
        database: str,
        table: str,
        partition_keys: tuple[str, ...],
        values: tuple[str, ...],
        location: str,
    ) -> bool:
        return self.set_partition_locations(database, table, partition_keys, [(values, location)])

    def set_partition_locations(
        self,
        database: str,
        table: str,
        partition_keys: tuple[str, ...],
        moves: Sequence[tuple[tuple[str, ...], str]],
    ) -> bool:
        """BatchGetPartition (1,000 a call), then BatchUpdatePartition (100 a call) of those not at
        their location yet, with each partition's storage descriptor at its new location (Glue keeps
        a version per update); missing partitions are created there with the table's storage
        descriptor (BatchCreatePartition). A replay of a week moves thousands of partitions: about
        two calls per hundred instead of two per partition. Credentials that may not call
        BatchUpdatePartition (a policy from before it) get UpdatePartition, one call a partition."""
        wanted = dict(moves)
        doing = f"moving {len(wanted)} partitions of {database}.{table} to their version folders"
        found: dict[tuple[str, ...], dict[str, Any]] = {}
        asked = list(wanted)
        for _ in range(UPDATE_ATTEMPTS):  # keys Glue left unprocessed are asked again
            unprocessed: list[tuple[str, ...]] = []
            for start in range(0, len(asked), PARTITION_GET_BATCH):
                answer = self._call(
                    "batch_get_partition", doing, ignore=(self.client.exceptions.EntityNotFoundException,),
                    DatabaseName=database, TableName=table,
                    PartitionsToGet=[{"Values": list(v)} for v in asked[start : start + PARTITION_GET_BATCH]],
                )  # fmt: skip
                if answer is None:  # no such table (or database)
                    return False
                found.update((tuple(p["Values"]), p) for p in answer.get("Partitions", []))
                unprocessed += [tuple(k["Values"]) for k in answer.get("UnprocessedKeys", [])]
            if not unprocessed:
                break
            asked = unprocessed
        else:
            raise GlueError(f"Glue left {len(asked)} partitions of {database}.{table} unread ({doing})")
        entries: list[dict[str, Any]] = []
        for values, location in wanted.items():
            partition = found.get(values)
            if partition is None or partition["StorageDescriptor"].get("Location") == location:
                continue
            descriptor = copy.deepcopy(partition["StorageDescriptor"])
            descriptor["Location"] = location
            partition_input: dict[str, Any] = {"Values": list(values), "StorageDescriptor": descriptor}
            if partition.get("Parameters"):
                partition_input["Parameters"] = partition["Parameters"]
            entries.append({"PartitionValueList": list(values), "PartitionInput": partition_input})
        for start in range(0, len(entries), PARTITION_BATCH):
            chunk = entries[start : start + PARTITION_BATCH]
            if not self.batch_update_refused:
                try:
                    answer = self._call(
                        "batch_update_partition", doing, DatabaseName=database, TableName=table,
                        Entries=chunk,
                    )  # fmt: skip
                    self._refuse_errors(answer, doing, "PartitionValueList")
                    continue
                except PermissionsError:
                    self.batch_update_refused = True
            for entry in chunk:
                self._call("update_partition", doing, DatabaseName=database, TableName=table, **entry)
        missing = [values for values in wanted if values not in found]
        if not missing:
            return True
        described = self._get_table(database, table)
        if described is None:
            return False
        for start in range(0, len(missing), PARTITION_BATCH):
            created = []
            for values in missing[start : start + PARTITION_BATCH]:
                descriptor = copy.deepcopy(described["StorageDescriptor"])
                descriptor["Location"] = wanted[values]
                created.append({"Values": list(values), "StorageDescriptor": descriptor})
            answer = self._call(
                "batch_create_partition", doing, DatabaseName=database, TableName=table,
                PartitionInputList=created,
            )  # fmt: skip
            self._refuse_errors(answer, doing, "PartitionValues")
        return True

    @staticmethod
    def _refuse_errors(answer: Any, doing: str, values_key: str) -> None:
        """A batch call's per-partition errors, as one :class:`GlueError` naming the first."""
        errors = (answer or {}).get("Errors", [])
        if errors:
            first = errors[0]
            raise GlueError(
                f"Glue failed {doing} for {len(errors)} partitions, e.g. {first.get(values_key)}: "
                f"{first['ErrorDetail'].get('ErrorCode', '')} {first['ErrorDetail'].get('ErrorMessage', '')}"
            )

    def partitions(self, database: str, table: str) -> list[tuple[str, ...]]:
        return sorted(self.partition_locations(database, table))

    def partition_locations(self, database: str, table: str) -> dict[tuple[str, ...], str]:
        """Each partition's values and location, as a reader through Glue (Athena) finds them."""
        found = self._pages(
            "get_partitions",
            "Partitions",
            f"listing partitions of {database}.{table}",
            DatabaseName=database,
            TableName=table,
        )
        return {tuple(p["Values"]): p["StorageDescriptor"]["Location"] for p in found}

    def drop_table(self, database: str, table: str) -> None:
        self._call(
            "delete_table",
            f"dropping table {database}.{table}",
            ignore=(self.client.exceptions.EntityNotFoundException,),
            DatabaseName=database,
            Name=table,
        )

    def view_definitions(self, database: str, names: Sequence[str]) -> dict[str, object]:
        """GetTables (100 a call) instead of a GetTable per view: each view's ``ViewOriginalText``
        (Athena's Presto view: the SQL and its columns), :data:`NOT_A_VIEW` for a table."""
        wanted = set(names)
        tables = self._pages(
            "get_tables", "TableList", f"listing tables of {database}", DatabaseName=database
        )
        return {
            t["Name"]: t.get("ViewOriginalText") if t.get("TableType") == "VIRTUAL_VIEW" else NOT_A_VIEW
            for t in tables
            if t["Name"] in wanted
        }

    def view_definition(self, database: str, view: View) -> object:
        return athena_view(database, view)["ViewOriginalText"]

    def write_view(self, database: str, view: View, replace: bool) -> None:
        """CreateTable, or UpdateTable of a view whose text changed (each is a new table version)."""
        self._call(
            "update_table" if replace else "create_table",
            f"{'replacing' if replace else 'creating'} view {database}.{view.name}",
            DatabaseName=database, TableInput=athena_view(database, view),
        )  # fmt: skip

    def drop_database(self, database: str) -> None:
        for table in self.list_tables(database):
            self.drop_table(database, table)
        self._call(
            "delete_database",
            f"dropping database {database}",
            ignore=(self.client.exceptions.EntityNotFoundException,),
            Name=database,
        )

    @staticmethod
    def _storage(spec: TableSpec, columns: Sequence[Column], location: str) -> dict[str, Any]:
        descriptor = copy.deepcopy(FORMATS.get(spec.format, FORMATS["parquet"]))
        descriptor["Columns"] = [{"Name": name, "Type": kind} for name, kind in columns]
        descriptor["Location"] = location
        return descriptor


# eventlake's column types in Athena's (Presto/Trino) SQL
_ATHENA_TYPES = {"string": "varchar", "bigint": "bigint", "boolean": "boolean", "timestamp": "timestamp",
                 "double": "double"}  # fmt: skip


def _athena_type(kind: str) -> str:
    return _ATHENA_TYPES.get(kind, kind)  # decimal(38,6) is spelled the same


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def athena_view(database: str, view: View) -> dict[str, Any]:
    """A Glue ``TableInput`` for ``view`` as Athena creates one (``CREATE VIEW`` in Athena): a
    ``VIRTUAL_VIEW`` whose ``ViewOriginalText`` is ``/* Presto View: <base64 JSON> */``."""
    sql = view_sql(view, database, _quote, _athena_type)
    document = {
        "originalSql": sql,
        "catalog": "awsdatacatalog",
        "schema": database,
        "columns": [{"name": name, "type": _athena_type(kind)} for name, kind in view.columns],
        "owner": "eventlake",
        "runAsInvoker": False,
        "properties": {},
    }
    encoded = base64.b64encode(orjson.dumps(document)).decode()
    return {
        "Name": view.name,
        "TableType": "VIRTUAL_VIEW",
        "Parameters": {"presto_view": "true", "comment": "Presto View"},
        "ViewOriginalText": f"/* Presto View: {encoded} */",
        "ViewExpandedText": "/* Presto View */",
        "StorageDescriptor": {
            "Columns": [{"Name": name, "Type": kind} for name, kind in view.columns],
            "SerdeInfo": {},
            "Location": "",
        },
        "PartitionKeys": [],
    }
