"""Reads tables of mink's lake by name through its Iceberg REST catalog with
PyIceberg, as another engine would (cmd/mink/iceberg_rest_e2e_test.go).

    iceberg_read.py URI NAMESPACE.TABLE[,...] [KEY=VALUE ...]

URI is the catalog's base (http://<admin-addr>/iceberg); KEY=VALUE pairs are
extra catalog properties (credentials, s3 keys). Prints one JSON object:
{"namespaces": [...], "tables": {"ns": [...]}, "read": {"ns.t": {
"metadata_location": ..., "snapshot_id": ..., "columns": [...],
"rows": [[...], ...]}}}; a table that cannot be loaded gets {"error": ...}.
"""

import json
import sys

from pyiceberg.catalog.rest import RestCatalog


def main():
    uri, names = sys.argv[1], sys.argv[2].split(",")
    props = dict(kv.split("=", 1) for kv in sys.argv[3:])
    cat = RestCatalog("mink", uri=uri, **props)
    out = {
        "namespaces": [".".join(ns) for ns in cat.list_namespaces()],
        "tables": {},
        "read": {},
    }
    for ns in out["namespaces"]:
        out["tables"][ns] = [".".join(ident) for ident in cat.list_tables(ns)]
    for name in names:
        try:
            tbl = cat.load_table(name)
        except Exception as e:  # the test asserts on the message
            out["read"][name] = {"error": f"{type(e).__name__}: {e}"}
            continue
        arrow = tbl.scan().to_arrow()
        snap = tbl.current_snapshot()
        out["read"][name] = {
            "metadata_location": tbl.metadata_location,
            "snapshot_id": snap.snapshot_id if snap else None,
            "columns": arrow.schema.names,
            "rows": [list(r.values()) for r in arrow.to_pylist()],
        }
    json.dump(out, sys.stdout, default=str)


if __name__ == "__main__":
    main()
