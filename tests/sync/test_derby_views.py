"""The warehouse views on the embedded Derby metastore, whatever their length: Hive 2.3 keeps a
view's text in ``TBLS.VIEW_ORIGINAL_TEXT`` / ``VIEW_EXPANDED_TEXT``, LONG VARCHAR on Derby (32,700
characters) unless eventlake makes them CLOB (:mod:`eventlake.jvm.metastore.derby_schema`)."""

from __future__ import annotations

import pytest

from eventlake.sync import run_sync
from tests.sync.test_sync import track

pytestmark = pytest.mark.spark

DERBY_LONG_VARCHAR = 32_700


def test_a_tracks_view_longer_than_derby_long_varchar_is_written_and_lists_every_track_table(
    lake, spark, capfd
) -> None:
    events = [f"Checkout Step {n:02d} Completed" for n in range(40)]
    context = {"app": {"name": "shop", "version": "1.0"}, "device": {"model": "x"}, "locale": "en"}
    lake.archive(
        [
            {**track(f"m{n}", event=event, step=n, cart="c1"), "context": context}
            for n, event in enumerate(events)
        ]
    )
    [result] = run_sync(lake.settings, [lake.slug], spark=spark)
    assert result.status == "Success"
    assert "views not replaced" not in "".join(capfd.readouterr())  # Derby's truncation error before

    db = lake.settings.database_name(lake.source)
    catalog = spark._jsparkSession.sessionState().catalog()
    identifier = spark._jvm.org.apache.spark.sql.catalyst.TableIdentifier("tracks", spark._jvm.scala.Some(db))
    assert len(catalog.getTableMetadata(identifier).viewText().get()) > DERBY_LONG_VARCHAR
    rows = spark.sql(f"SELECT event_text, count(*) AS n FROM {db}.tracks GROUP BY event_text").collect()
    assert {(row.event_text, row.n) for row in rows} == {(event, 1) for event in events}


def test_a_view_of_over_100000_characters_round_trips_through_the_derby_metastore(spark) -> None:
    text = "x" * 120_000
    spark.sql("CREATE DATABASE IF NOT EXISTS derby_views")
    spark.sql(f"CREATE OR REPLACE VIEW derby_views.long_text AS SELECT '{text}' AS s")
    spark.catalog.clearCache()
    assert spark.sql("SELECT length(s) AS n FROM derby_views.long_text").collect()[0].n == len(text)
    spark.sql("DROP VIEW derby_views.long_text")
