"""A psycopg2 client for mink's end-to-end tests (cmd/mink/sql_e2e_test.go).

Usage: /usr/bin/python3 psycopg2_client.py DSN TABLE

Connects, creates TABLE, inserts with parameters (execute and executemany),
loads rows with copy_expert, fetches them and checks every value and type
as psycopg2 decodes them from PostgreSQL. Prints "ok" and exits 0, or
prints what differed and exits 1. The table must not exist.
"""

import datetime
import decimal
import io
import sys
import uuid

import psycopg2
import psycopg2.errors
import psycopg2.extras

failures = []


def check(what, got, want):
    if got != want or type(got) is not type(want):
        failures.append(f"{what}: got {got!r} ({type(got).__name__}), want {want!r} ({type(want).__name__})")


def main():
    dsn, table = sys.argv[1], sys.argv[2]
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    cur = conn.cursor()

    check("server_version", conn.server_version >= 150000, True)

    cur.execute(f"""CREATE TABLE {table} (
        id bigint NOT NULL, name text, price numeric(10,2), ratio double precision,
        ok boolean, born date, seen timestamptz, raw bytea, tag uuid, doc jsonb,
        span interval, small smallint)""")
    check("CREATE TABLE statusmessage", cur.statusmessage, "CREATE TABLE")

    utc = datetime.timezone.utc
    seen = datetime.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=utc)
    tag = uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")
    psycopg2.extras.register_uuid()
    cur.execute(
        f"INSERT INTO {table} VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (1, "ann's", decimal.Decimal("12.34"), 0.5, True, datetime.date(2000, 2, 29), seen,
         psycopg2.Binary(b"\x00\x01\xff"), tag, psycopg2.extras.Json({"a": [1, 2]}),
         datetime.timedelta(days=1, seconds=3661), 7))
    check("INSERT rowcount", cur.rowcount, 1)
    cur.executemany(f"INSERT INTO {table} (id, name, ok) VALUES (%s, %s, %s)",
                    [(2, "bob", False), (3, None, None)])

    data = io.StringIO("4,copied,1.50,,t,2024-01-01,2024-01-01 00:00:00+00,\\x41,,\"{\"\"k\"\": \"\"v\"\"}\",00:00:01,\n"
                       "5,\"with, comma\",,,,,,,,,,\n")
    cur.copy_expert(f"COPY {table} FROM STDIN WITH (FORMAT csv)", data)
    check("COPY rowcount", cur.rowcount, 2)

    cur.execute(f"SELECT * FROM {table} ORDER BY id")
    rows = cur.fetchall()
    check("row count", len(rows), 5)
    check("columns", [d.name for d in cur.description],
          ["id", "name", "price", "ratio", "ok", "born", "seen", "raw", "tag", "doc", "span", "small"])
    r = rows[0]
    check("id", r[0], 1)
    check("name", r[1], "ann's")
    check("price", r[2], decimal.Decimal("12.34"))
    check("ratio", r[3], 0.5)
    check("ok", r[4], True)
    check("born", r[5], datetime.date(2000, 2, 29))
    check("seen", r[6], seen)
    check("raw", bytes(r[7]), b"\x00\x01\xff")
    check("tag", r[8], tag)
    check("doc", r[9], {"a": [1, 2]})
    check("span", r[10], datetime.timedelta(days=1, seconds=3661))
    check("small", r[11], 7)
    check("row 2", (rows[1][0], rows[1][1], rows[1][4]), (2, "bob", False))
    check("row 3", (rows[2][1], rows[2][4]), (None, None))
    r = rows[3]
    check("copied row", (r[1], r[2], r[4], r[5], bytes(r[7]), r[9], r[10]),
          ("copied", decimal.Decimal("1.50"), True, datetime.date(2024, 1, 1), b"A", {"k": "v"},
           datetime.timedelta(seconds=1)))
    check("copied seen", r[6], datetime.datetime(2024, 1, 1, tzinfo=utc))
    check("copied null ratio", r[3], None)
    check("comma row", rows[4][1], "with, comma")

    # Parameters in a WHERE clause, and an aggregate.
    cur.execute(f"SELECT count(*), sum(price) FROM {table} WHERE id >= %s AND name <> %s", (1, "bob"))
    check("aggregate", cur.fetchone(), (3, decimal.Decimal("13.84")))

    # Errors carry PostgreSQL's SQLSTATE and the connection stays usable.
    for sql, code, cls in [
        ("SELECT * FROM no_such_table", "42P01", psycopg2.errors.UndefinedTable),
        (f"SELECT no_such_column FROM {table}", "42703", psycopg2.errors.UndefinedColumn),
        (f"INSERT INTO {table} (name) VALUES ('x')", "23502", psycopg2.errors.NotNullViolation),
        (f"INSERT INTO {table} (id) VALUES ('x')", "22P02", psycopg2.errors.InvalidTextRepresentation),
        (f"UPDATE {table} SET name = 'x'", "0A000", psycopg2.errors.FeatureNotSupported),
    ]:
        try:
            cur.execute(sql)
            failures.append(f"{sql}: no error, want {code}")
        except psycopg2.Error as e:
            check(f"{sql} pgcode", e.pgcode, code)
            check(f"{sql} class", isinstance(e, cls), True)

    # A transaction: psycopg2's default is a transaction block per cursor use.
    conn.autocommit = False
    cur.execute(f"INSERT INTO {table} (id) VALUES (100)")
    cur.execute(f"SELECT count(*) FROM {table} WHERE id = 100")
    check("own write in transaction", cur.fetchone()[0], 1)
    conn.rollback()
    cur.execute(f"SELECT count(*) FROM {table} WHERE id = 100")
    check("after rollback", cur.fetchone()[0], 0)
    cur.execute(f"INSERT INTO {table} (id) VALUES (101)")
    conn.commit()
    cur.execute(f"SELECT count(*) FROM {table} WHERE id = 101")
    check("after commit", cur.fetchone()[0], 1)
    # A failed transaction rejects statements until rollback.
    try:
        cur.execute("SELECT * FROM no_such_table")
    except psycopg2.Error:
        pass
    try:
        cur.execute("SELECT 1")
        failures.append("statement in a failed transaction: no error, want 25P02")
    except psycopg2.Error as e:
        check("failed transaction pgcode", e.pgcode, "25P02")
    conn.rollback()
    cur.execute("SELECT 1")
    check("after failed transaction", cur.fetchone(), (1,))

    # Schema changes in psycopg2's implicit transaction, as ORMs and
    # migration tools send them: a serial key, RETURNING, commit; a
    # rolled-back CREATE leaves no table.
    serial = table + "_serial"
    cur.execute(f"CREATE TABLE {serial} (id bigserial PRIMARY KEY, name text NOT NULL, made timestamptz DEFAULT now())")
    psycopg2.extras.execute_values(cur, f"INSERT INTO {serial} (name) VALUES %s RETURNING id, name", [("a",), ("b",), ("c",)])
    check("serial ids in RETURNING", cur.fetchall(), [(1, "a"), (2, "b"), (3, "c")])
    conn.commit()
    cur.execute(f"SELECT count(*) FROM {serial} WHERE made <= now()")
    check("rows after commit", cur.fetchone()[0], 3)
    cur.execute(f"CREATE TABLE {serial}_gone (a int)")
    conn.rollback()
    try:
        cur.execute(f"SELECT * FROM {serial}_gone")
        failures.append("table created in a rolled-back transaction: still there")
    except psycopg2.Error as e:
        check("rolled-back CREATE TABLE pgcode", e.pgcode, "42P01")
    conn.rollback()
    cur.execute(f"DROP TABLE {serial}")
    conn.commit()
    conn.close()

    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
