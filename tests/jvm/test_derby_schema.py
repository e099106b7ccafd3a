"""An embedded Derby metastore made before eventlake mapped a view's texts to CLOB is converted
once, keeping its views' texts (a JVM: DataNucleus SchemaTool makes the old schema, ij reads it)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from eventlake import state_layout
from eventlake.jvm.java import java_executable, pyspark_home
from eventlake.jvm.metastore.derby_schema import MARKER_KEY, ensure_view_text_clob

pytestmark = pytest.mark.spark  # starts JVMs

TYPES = (
    "SELECT C.COLUMNNAME, CAST(C.COLUMNDATATYPE AS VARCHAR(40)) FROM SYS.SYSCOLUMNS C JOIN SYS.SYSTABLES T"
    " ON C.REFERENCEID = T.TABLEID WHERE T.TABLENAME = 'TBLS' AND C.COLUMNNAME LIKE 'VIEW_%';"
)


def _ij(database: Path, *statements: str) -> str:
    script = "\n".join([f"connect 'jdbc:derby:{database}';", *statements, "exit;", ""])
    command = [java_executable(), "-cp", f"{pyspark_home() / 'jars'}/*", "org.apache.derby.tools.ij"]
    return subprocess.run(command, input=script, capture_output=True, text=True, check=True).stdout


def _old_metastore(state: Path) -> Path:
    """A Derby metastore as Hive 2.3's package.jdo makes it (no package-derby.orm): LONG VARCHAR."""
    database = state_layout.metastore_dir(state)
    state.mkdir(parents=True)
    props = state / "schematool.properties"
    props.write_text(
        f"javax.jdo.option.ConnectionURL=jdbc\\:derby\\:;databaseName={database};create=true\n"
        "javax.jdo.option.ConnectionDriverName=org.apache.derby.jdbc.EmbeddedDriver\n"
        "javax.jdo.option.ConnectionUserName=APP\njavax.jdo.option.ConnectionPassword=mine\n"
    )
    command = [
        java_executable(), "-cp", f"{pyspark_home() / 'jars'}/*", "org.datanucleus.store.schema.SchemaTool",
        "-create", "-api", "JDO", "-props", str(props), "package.jdo",
    ]  # fmt: skip
    subprocess.run(command, capture_output=True, check=True, cwd=state)
    return database


def test_an_existing_metastore_gets_clob_view_texts_once_and_keeps_its_views(tmp_path: Path) -> None:
    state = tmp_path / "state"
    database = _old_metastore(state)
    out = _ij(
        database,
        TYPES,
        "INSERT INTO APP.TBLS (CREATE_TIME, LAST_ACCESS_TIME, RETENTION, IS_REWRITE_ENABLED,"
        " VIEW_ORIGINAL_TEXT, VIEW_EXPANDED_TEXT) VALUES (0, 0, 0, 'N', 'SELECT 1', 'SELECT 2');",
    )
    assert out.count("LONG VARCHAR") == 2
    assert "1 row inserted" in out

    said: list[str] = []
    ensure_view_text_clob(state, said.append)
    assert said == ["converting the embedded metastore's view text columns to CLOB (once) ..."]
    assert state_layout.metastore_schema_marker(state, MARKER_KEY).exists()
    out = _ij(database, TYPES, "SELECT VIEW_ORIGINAL_TEXT || '/' || VIEW_EXPANDED_TEXT FROM APP.TBLS;")
    assert out.count("CLOB(2147483647)") == 2
    assert "SELECT 1/SELECT 2" in out

    ensure_view_text_clob(state, said.append)  # the marker: nothing more to do
    assert len(said) == 1


def test_a_new_metastore_is_only_marked(tmp_path: Path) -> None:
    state = tmp_path / "state"  # no Derby database yet: DataNucleus makes TBLS with package-derby.orm
    said: list[str] = []
    ensure_view_text_clob(state, said.append)
    assert said == []
    assert state_layout.metastore_schema_marker(state, MARKER_KEY).exists()


def test_the_checked_in_jar_holds_exactly_the_orm_file() -> None:
    """``derby-metastore-orm.jar`` is ``package-derby.orm`` zipped (the class path needs a jar): an
    edit of the one without the other would leave DataNucleus reading the old mapping. Rebuild it
    with ``cd src/eventlake/jvm/metastore && rm derby-metastore-orm.jar &&
    TZ=UTC zip -X derby-metastore-orm.jar package-derby.orm``."""
    import zipfile
    from importlib import resources

    from eventlake.jvm.metastore.derby_schema import orm_jar

    folder = resources.files("eventlake.jvm.metastore")
    with zipfile.ZipFile(orm_jar()) as jar:
        assert jar.namelist() == ["package-derby.orm"]
        assert jar.read("package-derby.orm") == folder.joinpath("package-derby.orm").read_bytes()
