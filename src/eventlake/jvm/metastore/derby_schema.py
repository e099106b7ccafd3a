"""The embedded Derby metastore's view texts: CLOB, not Hive 2.3's LONG VARCHAR.

Hive 2.3's ``package.jdo`` maps a view's original and expanded texts (``TBLS.VIEW_ORIGINAL_TEXT``,
``VIEW_EXPANDED_TEXT``) to ``LONGVARCHAR``: ``LONG VARCHAR`` on Derby, 32,700 characters. The
``tracks`` warehouse view of a source with 30 track tables is longer (56,975 characters on
``bench/sync.py --input basic``) and grows with every track event; PostgreSQL (``text``) and MySQL
(``mediumtext``) hold it. So on Derby:

- a new metastore gets CLOB columns (2 GB): ``datanucleus.mapping=derby`` makes DataNucleus read
  ``package-derby.orm`` from :data:`ORM_JAR` on the class path (a jar, not a folder: a class-data
  archive admits no non-empty folder on the class path);
- an existing one (made by an eventlake before this) is converted once, before any JVM opens it,
  with the pyspark wheel's BeeLine: Derby cannot ALTER a LONG VARCHAR to a CLOB, so each
  column is added as a CLOB, copied, dropped and renamed, in one transaction (Derby's DDL is
  transactional: an interrupted conversion is rolled back and runs again next time; run again on
  CLOB columns, it copies CLOB to CLOB). A marker in ``state_dir/metastore`` remembers it.
"""

from __future__ import annotations

import os
import subprocess
from importlib import resources
from pathlib import Path

from eventlake import progress, state_layout
from eventlake.jvm.errors import MetastoreError
from eventlake.jvm.java import java_executable, pyspark_home
from eventlake.progress import Say
from eventlake.storage.local import write_atomic

MARKER_KEY = "derby-view-text-clob"

_COLUMNS = ("VIEW_ORIGINAL_TEXT", "VIEW_EXPANDED_TEXT")


def orm_jar() -> str:
    """The jar of ``package-derby.orm``, for the class path of a JVM that opens Derby."""
    return str(resources.files("eventlake.jvm.metastore").joinpath("derby-metastore-orm.jar"))


def conversion_script() -> str:
    """The statements that make ``TBLS``'s view texts CLOB, committed at the end alone."""
    lines = []
    for column in _COLUMNS:
        lines += [
            f"ALTER TABLE APP.TBLS ADD COLUMN {column}_CLOB CLOB;",
            f"UPDATE APP.TBLS SET {column}_CLOB = {column};",
            f"ALTER TABLE APP.TBLS DROP COLUMN {column};",
            f"RENAME COLUMN APP.TBLS.{column}_CLOB TO {column};",
        ]
    return "\n".join([*lines, "!commit", ""])


def ensure_view_text_clob(state: Path, say: Say = progress.say) -> None:
    """Convert an existing embedded metastore's view texts to CLOB, once (see the module's doc).
    The caller holds the embedded metastore's lock: no JVM has Derby open."""
    marker = state_layout.metastore_schema_marker(state, MARKER_KEY)
    if marker.exists():
        return
    database = state_layout.metastore_dir(state)
    if (database / "service.properties").exists():  # a Derby database made before this marker
        say("converting the embedded metastore's view text columns to CLOB (once) ...")
        _run_beeline(state, conversion_script())
    marker.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(marker, b"TBLS.VIEW_ORIGINAL_TEXT and VIEW_EXPANDED_TEXT are CLOB\n")


def _run_beeline(state: Path, script: str) -> None:
    """Run ``script`` on the embedded Derby with the wheel's BeeLine, one transaction: BeeLine stops
    at the first failing statement, and Derby rolls back what was not committed."""
    folder = state_layout.metastore_state_dir(state)
    folder.mkdir(parents=True, exist_ok=True)
    sql_file = state_layout.metastore_temp_file(state, "derby-clob", os.getpid(), ".sql")
    sql_file.write_text(script)
    command = [
        java_executable(),
        "-cp",
        f"{pyspark_home() / 'jars'}/*",
        f"-Dderby.stream.error.file={state_layout.derby_log(state)}",
        "org.apache.hive.beeline.BeeLine",
        "-u",
        f"jdbc:derby:{state_layout.metastore_dir(state)}",
        "-d",
        "org.apache.derby.jdbc.EmbeddedDriver",
        "-n",
        "APP",
        "-p",
        "",
        "--autoCommit=false",
        "--silent=true",
        "-f",
        str(sql_file),
    ]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=folder)
    finally:
        sql_file.unlink(missing_ok=True)
    output = result.stdout + result.stderr
    errors = [line.strip() for line in output.splitlines() if line.startswith("Error:")]
    if errors and "state=42Y55" in errors[0]:  # no TBLS yet: DataNucleus will make it, CLOB
        return
    if result.returncode != 0 or errors:
        detail = (errors or output.strip().splitlines()[-1:] or ["no output"])[0]
        raise MetastoreError(
            f"converting the embedded metastore's view texts to CLOB failed: {detail[:300]} "
            f"(in {state_layout.metastore_dir(state)}; Derby rolled the conversion back: it is tried "
            "again next time)"
        )
