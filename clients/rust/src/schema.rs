//! SQL column types → Arrow fields, as the server maps them
//! (`docs/sql-types.md`, Go `internal/sqltypes`). `testdata/schemas.json`,
//! written by the Go code, checks every type.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_schema::{DataType, Field, IntervalUnit, TimeUnit};

use crate::error::{Error, Result};

/// The field metadata key under which mink records a column's SQL type.
pub const SQL_TYPE_KEY: &str = "mink.sql_type";
const EXTENSION_NAME: &str = "ARROW:extension:name";
const EXTENSION_METADATA: &str = "ARROW:extension:metadata";

/// The Arrow type of a scalar SQL type, and the extension it is stored as
/// (`arrow.uuid`, `arrow.json`), if any.
fn scalar(name: &str) -> Option<(DataType, Option<&'static str>)> {
    let name = name.trim();
    let (base, mods) = match name.find('(') {
        Some(i) if name.ends_with(')') => (name[..i].trim(), Some(&name[i + 1..name.len() - 1])),
        _ => (name, None),
    };
    let ints = |m: &str| -> Option<Vec<u8>> {
        m.split(',').map(|p| p.trim().parse::<u8>().ok()).collect()
    };
    let dt = match (base, mods) {
        ("boolean" | "bool", None) => DataType::Boolean,
        ("smallint" | "int2", None) => DataType::Int16,
        ("integer" | "int" | "int4", None) => DataType::Int32,
        ("bigint" | "int8", None) => DataType::Int64,
        ("real" | "float4", None) => DataType::Float32,
        ("double precision" | "float8" | "float", None) => DataType::Float64,
        ("float", Some(m)) => match m.trim().parse::<u8>().ok()? {
            1..=24 => DataType::Float32,
            25..=53 => DataType::Float64,
            _ => return None,
        },
        ("numeric" | "decimal", None) => DataType::Decimal128(38, 10),
        ("numeric" | "decimal", Some(m)) => match ints(m)?.as_slice() {
            [p] => DataType::Decimal128(*p, 0),
            [p, s] => DataType::Decimal128(*p, *s as i8),
            _ => return None,
        },
        (
            "text" | "character varying" | "varchar" | "char varying" | "character" | "char"
            | "bpchar",
            _,
        ) => DataType::Utf8,
        ("bytea", None) => DataType::Binary,
        ("date", None) => DataType::Date32,
        ("time" | "time without time zone", None) => DataType::Time64(TimeUnit::Microsecond),
        ("timestamp" | "timestamp without time zone", None) => {
            DataType::Timestamp(TimeUnit::Microsecond, None)
        }
        ("timestamptz" | "timestamp with time zone", None) => {
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        }
        ("interval", None) => DataType::Interval(IntervalUnit::MonthDayNano),
        ("uuid", None) => return Some((DataType::FixedSizeBinary(16), Some("arrow.uuid"))),
        ("json" | "jsonb", None) => return Some((DataType::Utf8, Some("arrow.json"))),
        _ => return None,
    };
    Some((dt, None))
}

fn extension_metadata(ext: Option<&str>) -> HashMap<String, String> {
    let mut md = HashMap::new();
    if let Some(ext) = ext {
        md.insert(EXTENSION_NAME.to_string(), ext.to_string());
        md.insert(EXTENSION_METADATA.to_string(), String::new());
    }
    md
}

/// The Arrow type of a SQL type (`integer`, `numeric(12,2)`, `text[]`, …).
/// Extension types (uuid, json) are their storage type here; [`field`]
/// adds the extension metadata.
///
/// ```
/// use arrow_schema::{DataType, TimeUnit};
/// use mink_client::schema::arrow_type;
/// assert_eq!(arrow_type("numeric(12,2)").unwrap(), DataType::Decimal128(12, 2));
/// assert_eq!(arrow_type("timestamptz").unwrap(), DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())));
/// assert!(arrow_type("frobnicate").is_err());
/// ```
pub fn arrow_type(sql_type: &str) -> Result<DataType> {
    Ok(parse(sql_type)?.0)
}

fn parse(sql_type: &str) -> Result<(DataType, Option<&'static str>)> {
    let lower = sql_type.trim().to_ascii_lowercase();
    let lower = lower
        .strip_prefix("pg_catalog.")
        .unwrap_or(&lower)
        .to_string();
    let elem = if let Some(e) = lower.strip_suffix("[]") {
        Some(e.trim_end().to_string())
    } else {
        lower.strip_prefix('_').map(|e| match e {
            "int2" | "int4" | "int8" | "float4" | "float8" | "bool" | "varchar" | "bpchar"
            | "text" | "numeric" | "bytea" | "date" | "time" | "timestamp" | "timestamptz"
            | "interval" | "uuid" | "json" | "jsonb" => e.to_string(),
            _ => String::new(),
        })
    };
    let unknown = || Error::InvalidArgument(format!("unknown SQL type {sql_type:?}"));
    match elem {
        Some(e) => {
            let (dt, ext) = scalar(&e).ok_or_else(unknown)?;
            let item = Field::new("item", dt, true).with_metadata(extension_metadata(ext));
            Ok((DataType::List(Arc::new(item)), None))
        }
        None => scalar(&lower).ok_or_else(unknown),
    }
}

/// The Arrow field of a column, as the server's schemas have it: the
/// column's Arrow type, nullable unless `NOT NULL`, the SQL type under
/// [`SQL_TYPE_KEY`] and, for uuid and json, Arrow's extension metadata.
///
/// ```
/// let f = mink_client::schema::field("id", "uuid", true).unwrap();
/// assert!(!f.is_nullable());
/// assert_eq!(f.metadata()["ARROW:extension:name"], "arrow.uuid");
/// assert_eq!(f.metadata()["mink.sql_type"], "uuid");
/// ```
pub fn field(name: &str, sql_type: &str, not_null: bool) -> Result<Field> {
    let (dt, ext) = parse(sql_type)?;
    let mut md = extension_metadata(ext);
    md.insert(SQL_TYPE_KEY.to_string(), sql_type.to_string());
    Ok(Field::new(name, dt, !not_null).with_metadata(md))
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Vector {
        sql_type: String,
        name: String,
        schema: String,
    }

    #[test]
    fn every_sql_type_maps_as_the_server_maps_it() {
        let vs: Vec<Vector> =
            serde_json::from_str(include_str!("../testdata/schemas.json")).unwrap();
        assert!(vs.len() > 40);
        for v in vs {
            let ipc = base64::engine::general_purpose::STANDARD
                .decode(&v.schema)
                .unwrap();
            let want = arrow_ipc::convert::try_schema_from_ipc_buffer(&ipc).unwrap();
            let want = want.field(0);
            // The canonical name (what describe-table says) gives exactly
            // the server's field, metadata included.
            let got = field("c", &v.name, false).unwrap();
            assert_eq!(&got, want, "{} ({})", v.name, v.sql_type);
            // Every other spelling gives the same Arrow type.
            assert_eq!(
                &arrow_type(&v.sql_type).unwrap(),
                want.data_type(),
                "{}",
                v.sql_type
            );
        }
    }

    #[test]
    fn unknown_types_are_errors_not_panics() {
        for bad in [
            "",
            "frobnicate",
            "numeric(x)",
            "numeric(1,2,3)",
            "int[",
            "float(99)",
            "_nope",
        ] {
            assert!(arrow_type(bad).is_err(), "{bad:?}");
        }
    }
}
