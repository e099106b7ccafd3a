"""A PySpark transform job: daily revenue from the lake, written back as a table in the catalog.

Run it in the project directory (beside eventlake.toml) with eventlake's Python:
    python examples/daily_revenue.py --source web
then query the result like any table:
    eventlake sql "SELECT * FROM analytics.daily_revenue ORDER BY day"
"""

from __future__ import annotations

import argparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from eventlake.config import Settings, load_settings
from eventlake.jvm.session import spark_session


def daily_revenue(orders: DataFrame) -> DataFrame:
    """Orders, buyers and revenue per received day and currency."""
    return (
        orders.groupBy("day", F.col("properties_currency").alias("currency"))
        .agg(
            F.count("*").alias("orders"),
            F.countDistinct("user_id").alias("buyers"),
            F.sum("properties_revenue").alias("revenue"),
        )
        .orderBy("day", "currency")
    )


def run(spark: SparkSession, settings: Settings, source: str, target: str = "analytics.daily_revenue") -> int:
    """Read the source's orders through the catalog, aggregate, write ``target``; returns its rows."""
    database = settings.catalog.database_prefix + settings.source(source).database
    result = spark.table(f"{database}.track_order_completed").transform(daily_revenue)
    target_database, table = target.split(".")
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {target_database}")
    # an external table in the lake, beside segment-data/: any engine on the cluster can read it
    path = settings.lake.root / target_database / table
    result.write.mode("overwrite").option("path", str(path)).saveAsTable(target)
    return spark.table(target).count()


def main(argv: list[str] | None = None, spark: SparkSession | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="eventlake.toml (default: ./eventlake.toml or $EVENTLAKE_CONFIG)")
    parser.add_argument("--source", default="web", help="the source whose orders to aggregate")
    args = parser.parse_args(argv)
    settings = load_settings(args.config)
    own = spark is None
    if own:  # the same Spark and catalog as eventlake's own commands
        spark = spark_session(settings, "daily-revenue")
    try:
        print(f"wrote analytics.daily_revenue, rows: {run(spark, settings, args.source)}")
    finally:
        if own:
            spark.stop()


if __name__ == "__main__":
    main()
