"""SQLAlchemy 1.4 and pandas (Debian's python3-sqlalchemy and python3-pandas,
over psycopg2) against mink, for cmd/mink/sql_e2e_test.go.

Usage: /usr/bin/python3 sqlalchemy_client.py URL

Creates two tables with SQL, reflects them (Inspector.get_columns,
get_pk_constraint, get_indexes, get_foreign_keys, Table(autoload_with=...)),
then maps a class onto one with the ORM, adds rows in a session, commits,
queries them back, updates one and deletes one; then pandas writes a
DataFrame with to_sql (create, append, replace) and reads it back with
read_sql and read_sql_table; last, a schema of its own (sa_schema):
get_schema_names, get_table_names/get_columns/get_pk_constraint with
schema=, an ORM round trip on a table with MetaData(schema=...), and
to_sql/read_sql_table with schema=. Prints "ok" and exits 0, or prints
what differed and exits 1. The tables and the schema must not exist.
"""

import datetime
import decimal
import sys

import pandas as pd
import sqlalchemy as sa
from sqlalchemy import orm

failures = []


def check(what, got, want):
    if got != want:
        failures.append(f"{what}: got {got!r}, want {want!r}")


def main():
    engine = sa.create_engine(sys.argv[1], future=True)
    with engine.begin() as conn:
        conn.execute(sa.text(
            "CREATE TABLE sa_items (id bigint PRIMARY KEY, name varchar(40) NOT NULL, "
            "price numeric(10,2) DEFAULT 0, added date)"))
        conn.execute(sa.text(
            "CREATE TABLE sa_events (at timestamptz NOT NULL, item bigint, what text)"))

    insp = sa.inspect(engine)
    # The node may hold other tests' tables too.
    check("table names", sorted(set(insp.get_table_names()) & {"sa_events", "sa_items"}), ["sa_events", "sa_items"])
    cols = insp.get_columns("sa_items")
    check("column names", [c["name"] for c in cols], ["id", "name", "price", "added"])
    check("column types", [str(c["type"]) for c in cols], ["BIGINT", "VARCHAR(40)", "NUMERIC(10, 2)", "DATE"])
    check("nullable", [c["nullable"] for c in cols], [False, False, True, True])
    check("price default", cols[2]["default"], "0")
    check("primary key", insp.get_pk_constraint("sa_items"),
          {"constrained_columns": ["id"], "name": "sa_items_pkey"})
    check("indexes", insp.get_indexes("sa_items"), [])
    check("foreign keys", insp.get_foreign_keys("sa_items"), [])
    check("event primary key", insp.get_pk_constraint("sa_events")["constrained_columns"], [])

    meta = sa.MetaData()
    items = sa.Table("sa_items", meta, autoload_with=engine)
    check("reflected columns", [c.name for c in items.columns], ["id", "name", "price", "added"])
    check("reflected key", [c.name for c in items.primary_key.columns], ["id"])

    Base = orm.declarative_base()

    class Item(Base):
        __table__ = items

    with orm.Session(engine) as session:
        session.add_all([
            Item(id=1, name="bolt", price=decimal.Decimal("0.25"), added=datetime.date(2024, 1, 2)),
            Item(id=2, name="nut", price=decimal.Decimal("0.10"), added=datetime.date(2024, 1, 3)),
            Item(id=3, name="gear", price=decimal.Decimal("12.50"), added=None),
        ])
        session.commit()
    with orm.Session(engine) as session:
        got = [(i.id, i.name, i.price, i.added) for i in session.query(Item).order_by(Item.id)]
        check("rows", got, [
            (1, "bolt", decimal.Decimal("0.25"), datetime.date(2024, 1, 2)),
            (2, "nut", decimal.Decimal("0.10"), datetime.date(2024, 1, 3)),
            (3, "gear", decimal.Decimal("12.50"), None),
        ])
        gear = session.get(Item, 3)
        gear.price = decimal.Decimal("11.00")
        session.delete(session.get(Item, 2))
        session.commit()
    with orm.Session(engine) as session:
        got = [(i.id, i.price) for i in session.query(Item).order_by(Item.id)]
        check("rows after update and delete", got, [(1, decimal.Decimal("0.25")), (3, decimal.Decimal("11.00"))])
        check("filter", session.query(Item).filter(Item.name.in_(["bolt", "gear"])).count(), 2)

    # pandas 1.5 takes a SQLAlchemy 1.x engine, not a future one.
    engine = sa.create_engine(sys.argv[1])
    df = pd.DataFrame({"id": [1, 2, 3], "name": ["a", "b", None], "score": [1.5, 2.25, None],
                       "day": pd.to_datetime(["2024-01-01", "2024-01-02", "2024-01-03"])})
    df.to_sql("sa_frame", engine, index=False)
    df.to_sql("sa_frame", engine, index=False, if_exists="append")
    back = pd.read_sql("SELECT * FROM sa_frame ORDER BY id, name", engine)
    check("frame dtypes", {k: str(v) for k, v in back.dtypes.items()},
          {"id": "int64", "name": "object", "score": "float64", "day": "datetime64[ns]"})
    check("frame ids", list(back["id"]), [1, 1, 2, 2, 3, 3])
    check("frame names", list(back["name"]), ["a", "a", "b", "b", None, None])
    check("frame days", [str(d.date()) for d in back["day"]], ["2024-01-01"] * 2 + ["2024-01-02"] * 2 + ["2024-01-03"] * 2)
    df.to_sql("sa_frame", engine, index=False, if_exists="replace")
    check("replaced frame", pd.read_sql_table("sa_frame", engine).shape, (3, 4))

    # A schema of its own.
    engine = sa.create_engine(sys.argv[1], future=True)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE SCHEMA sa_schema"))
        conn.execute(sa.text("CREATE TABLE sa_schema.sa_items (id bigint PRIMARY KEY, label text)"))
    insp = sa.inspect(engine)
    check("schema names", sorted(set(insp.get_schema_names()) & {"public", "sa_schema"}), ["public", "sa_schema"])
    check("schema's tables", insp.get_table_names(schema="sa_schema"), ["sa_items"])
    check("schema's columns", [c["name"] for c in insp.get_columns("sa_items", schema="sa_schema")], ["id", "label"])
    check("schema's primary key", insp.get_pk_constraint("sa_items", schema="sa_schema")["constrained_columns"], ["id"])
    check("public's sa_items still", [c["name"] for c in insp.get_columns("sa_items")], ["id", "name", "price", "added"])
    staged = sa.Table("sa_items", sa.MetaData(schema="sa_schema"), autoload_with=engine)
    with orm.Session(engine) as session:
        session.execute(staged.insert(), [{"id": 7, "label": "seven"}, {"id": 8, "label": "eight"}])
        session.commit()
        got = session.execute(sa.select(staged.c.id, staged.c.label).order_by(staged.c.id)).all()
        check("schema's rows", [tuple(r) for r in got], [(7, "seven"), (8, "eight")])
    engine = sa.create_engine(sys.argv[1])
    df.to_sql("sa_frame", engine, index=False, schema="sa_schema")
    check("schema's frame", pd.read_sql_table("sa_frame", engine, schema="sa_schema").shape, (3, 4))

    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print("ok")


main()
