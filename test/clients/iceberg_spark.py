"""Reads tables of mink's lake through its Iceberg REST catalog with Spark in
local mode (cmd/mink/iceberg_rest_e2e_test.go).

    iceberg_spark.py URI RUNTIME_JAR TABLE[,...]

Prints one JSON object: {"public.t": {"count": n, "sum_id": s,
"sum_n": s, "nulls_v": k}, ...}; a table Spark cannot read gets
{"error": ...}.
"""

import json
import sys

from pyspark.sql import SparkSession


def main():
    uri, jar, names = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("mink-iceberg-rest")
        .config("spark.jars", jar)
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config("spark.sql.catalog.mink", "org.apache.iceberg.spark.SparkCatalog")
        .config("spark.sql.catalog.mink.type", "rest")
        .config("spark.sql.catalog.mink.uri", uri)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    out = {}
    for name in names:
        try:
            row = spark.sql(
                f"SELECT count(*) AS c, sum(id) AS si, sum(n) AS sn, "
                f"count_if(v IS NULL) AS nv FROM mink.{name}"
            ).collect()[0]
            out[name] = {"count": row.c, "sum_id": row.si, "sum_n": row.sn, "nulls_v": row.nv}
        except Exception as e:  # the test asserts on the message
            out[name] = {"error": f"{type(e).__name__}: {e}"}
    spark.stop()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
