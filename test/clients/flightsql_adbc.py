"""Flight SQL through ADBC (adbc_driver_flightsql), unmodified, against a
mink node: cmd/mink/flightsql_adbc_e2e_test.go runs it as
flightsql_adbc.py <flight addr> <user> <password> and checks what it
prints (one JSON object per line)."""
import json
import sys

import adbc_driver_flightsql.dbapi as flight_sql
import adbc_driver_manager

addr, user, password = sys.argv[1:4]


def out(step, **kw):
    print(json.dumps(dict(step=step, **kw)), flush=True)


conn = flight_sql.connect("grpc://" + addr, db_kwargs={"username": user, "password": password})
cur = conn.cursor()

cur.execute("CREATE TABLE adbc_t (id bigint NOT NULL, name text, score double precision) WITH (buckets = 2, bucket_key = 'id')")
cur.execute("INSERT INTO adbc_t VALUES (1, 'one', 1.5), (2, 'two', NULL), (3, 'three', 3.5)")

cur.execute("SELECT id, name, score FROM adbc_t ORDER BY id")
table = cur.fetch_arrow_table()
out("query", schema=[f"{f.name}:{f.type}" for f in table.schema], rows=table.to_pylist())

# A prepared statement with a parameter; then again with another value.
cur.execute("SELECT name FROM adbc_t WHERE id = $1", parameters=(2,))
first = cur.fetchall()
cur.execute("SELECT name FROM adbc_t WHERE id = $1", parameters=(3,))
out("prepared", rows=[list(r) for r in first + cur.fetchall()])

# DML with a row count: executemany runs a prepared update per row.
cur.executemany("INSERT INTO adbc_t (id, name) VALUES ($1, $2)", [(4, "four"), (5, "five")])
inserted = cur.rowcount
cur.execute("SELECT count(*) FROM adbc_t")
count = cur.fetchone()[0]
# A primary-key table takes UPDATE and DELETE.
cur.execute("CREATE TABLE adbc_kv (k bigint PRIMARY KEY, v text) WITH (buckets = 1)")
cur.executemany("INSERT INTO adbc_kv VALUES ($1, $2)", [(1, "a"), (2, "b"), (3, "c")])
cur.execute("UPDATE adbc_kv SET v = 'B' WHERE k = 2")
cur.execute("DELETE FROM adbc_kv WHERE k = 3")
cur.execute("SELECT k, v FROM adbc_kv ORDER BY k")
out("dml", inserted=inserted, count=count, kv=[list(r) for r in cur.fetchall()])

objects = conn.adbc_get_objects(depth="all", table_name_filter="adbc_t%").read_all().to_pylist()
found = []
for cat in objects:
    for sch in cat["catalog_db_schemas"] or []:
        for tbl in sch["db_schema_tables"] or []:
            cols = [c["column_name"] for c in tbl["table_columns"] or []]
            found.append([cat["catalog_name"], sch["db_schema_name"], tbl["table_name"], tbl["table_type"], cols])
out("objects", tables=found)

info = conn.adbc_get_info()
out("info", vendor=info.get("vendor_name"), driver=info.get("driver_name"))

try:
    cur.execute("SELECT * FROM nosuch")
    out("error", error=None)
except adbc_driver_manager.Error as e:
    def text(v):
        return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)

    details = [[text(k), text(v)] for k, v in (e.details or [])]
    out("error", cls=type(e).__name__, message=str(e), status=str(e.status_code), sqlstate=text(e.sqlstate), details=details)

cur.close()
conn.close()
