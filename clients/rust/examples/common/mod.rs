#![allow(dead_code)]
//! What the examples share: flags and generated rows.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::*;
use arrow_array::types::IntervalMonthDayNanoType;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{ArrowError, DataType, Field, IntervalUnit, Schema, TimeUnit};

/// `--name value` flags and bare `--switch`es.
pub struct Flags(HashMap<String, Option<String>>);

impl Flags {
    pub fn parse(usage: &str) -> Flags {
        let mut m = HashMap::new();
        let mut args = std::env::args().skip(1).peekable();
        while let Some(a) = args.next() {
            let Some(name) = a.strip_prefix("--") else {
                fail(usage, &format!("unexpected argument {a:?}"));
            };
            let value = match args.peek() {
                Some(v) if !v.starts_with("--") => args.next(),
                _ => None,
            };
            m.insert(name.to_string(), value);
        }
        Flags(m)
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).and_then(|v| v.as_deref())
    }

    pub fn has(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    pub fn required(&self, name: &str, usage: &str) -> String {
        match self.get(name) {
            Some(v) => v.to_string(),
            None => fail(usage, &format!("--{name} is required")),
        }
    }

    pub fn number(&self, name: &str, default: u64, usage: &str) -> u64 {
        match self.get(name) {
            None => default,
            Some(v) => v
                .replace('_', "")
                .parse()
                .unwrap_or_else(|_| fail(usage, &format!("--{name} {v:?} is not a number"))),
        }
    }
}

/// The credentials every example logs in with: `$MINK_USER` with
/// `$MINK_PASSWORD`, for a cluster that requires them; none when
/// `MINK_USER` is unset.
pub fn credentials() -> Option<mink_client::Credentials> {
    let user = std::env::var("MINK_USER").ok().filter(|u| !u.is_empty())?;
    let password = std::env::var("MINK_PASSWORD").unwrap_or_default();
    Some(mink_client::Credentials::new(user, password))
}

/// The TLS every example dials with: the CA in `$MINK_CA_FILE`, the
/// client certificate and key in `$MINK_CERT_FILE` and `$MINK_KEY_FILE`,
/// the name to verify in `$MINK_TLS_DOMAIN` (all PEM files). None when
/// none is set: plaintext, or the system's roots for a `grpc+tls://`
/// `--server`.
pub fn tls() -> Option<mink_client::TlsConfig> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let read = |name: &str, path: String| {
        std::fs::read(&path).unwrap_or_else(|e| {
            eprintln!("${name} {path:?}: {e}");
            std::process::exit(2)
        })
    };
    let ca = var("MINK_CA_FILE");
    let cert = var("MINK_CERT_FILE");
    let key = var("MINK_KEY_FILE");
    let domain = var("MINK_TLS_DOMAIN");
    if ca.is_none() && cert.is_none() && key.is_none() && domain.is_none() {
        return None;
    }
    let mut tls = match ca {
        Some(path) => mink_client::TlsConfig::new(read("MINK_CA_FILE", path)),
        None => mink_client::TlsConfig::system_roots(),
    };
    match (cert, key) {
        (Some(cert), Some(key)) => {
            tls = tls.with_identity(read("MINK_CERT_FILE", cert), read("MINK_KEY_FILE", key))
        }
        (None, None) => {}
        _ => {
            eprintln!("$MINK_CERT_FILE and $MINK_KEY_FILE go together");
            std::process::exit(2)
        }
    }
    if let Some(domain) = domain {
        tls = tls.with_domain_name(domain);
    }
    Some(tls)
}

pub fn fail(usage: &str, msg: &str) -> ! {
    eprintln!("{msg}\nusage: {usage}");
    std::process::exit(2)
}

/// `N` of the SQL types `character varying(N)` and `character(N)`.
fn char_limit(sql_type: Option<&String>) -> Option<usize> {
    let t = sql_type?;
    if !(t.starts_with("character") || t.starts_with("varchar") || t.starts_with("char")) {
        return None;
    }
    let open = t.find('(')?;
    t[open + 1..t.len() - 1].parse().ok()
}

/// A batch of `schema` whose column `id` holds `ids` and whose other
/// columns hold values generated from them, of their types. The partition
/// column (if any) takes 3 distinct values.
pub fn generate(
    schema: &Schema,
    ids: &[i64],
    partition_by: Option<&str>,
) -> Result<RecordBatch, ArrowError> {
    let cols = schema
        .fields()
        .iter()
        .map(|f| {
            let card = (Some(f.name().as_str()) == partition_by).then_some(3);
            if f.name() == "id" {
                gen_ids(f.data_type(), ids)
            } else {
                gen_column(f, ids, card)
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(Arc::new(schema.clone()), cols)
}

fn gen_ids(dt: &DataType, ids: &[i64]) -> Result<ArrayRef, ArrowError> {
    Ok(match dt {
        DataType::Int16 => Arc::new(arrow_array::Int16Array::from_iter_values(
            ids.iter().map(|&i| i as i16),
        )),
        DataType::Int32 => Arc::new(arrow_array::Int32Array::from_iter_values(
            ids.iter().map(|&i| i as i32),
        )),
        DataType::Int64 => Arc::new(arrow_array::Int64Array::from_iter_values(
            ids.iter().copied(),
        )),
        DataType::Utf8 => Arc::new(arrow_array::StringArray::from_iter_values(
            ids.iter().map(|i| i.to_string()),
        )),
        dt => {
            return Err(ArrowError::InvalidArgumentError(format!(
                "an id column of type {dt}"
            )))
        }
    })
}

fn gen_column(field: &Field, ids: &[i64], card: Option<i64>) -> Result<ArrayRef, ArrowError> {
    let v = |i: i64| card.map_or(i, |c| i.rem_euclid(c));
    let ext = field
        .metadata()
        .get("ARROW:extension:name")
        .map(String::as_str);
    let limit = char_limit(field.metadata().get("mink.sql_type"));
    let n = ids.len();
    Ok(match field.data_type() {
        DataType::Boolean => Arc::new(arrow_array::BooleanArray::from_iter(
            ids.iter().map(|&i| Some(v(i) % 2 == 0)),
        )),
        DataType::Int16 => Arc::new(arrow_array::Int16Array::from_iter_values(
            ids.iter().map(|&i| (v(i) % 30000) as i16),
        )),
        DataType::Int32 => Arc::new(arrow_array::Int32Array::from_iter_values(
            ids.iter().map(|&i| v(i) as i32),
        )),
        DataType::Int64 => Arc::new(arrow_array::Int64Array::from_iter_values(
            ids.iter().map(|&i| v(i) * 7),
        )),
        DataType::Float32 => Arc::new(arrow_array::Float32Array::from_iter_values(
            ids.iter().map(|&i| v(i) as f32 * 0.5),
        )),
        DataType::Float64 => Arc::new(arrow_array::Float64Array::from_iter_values(
            ids.iter().map(|&i| v(i) as f64 * 0.25),
        )),
        DataType::Decimal128(p, s) => {
            let digits = (*p as i32 - *s as i32).clamp(1, 18) as u32;
            let m = 10i128.pow(digits);
            let scale = 10i128.pow(*s as u32);
            let vals = ids.iter().map(|&i| (v(i) as i128 % m) * scale);
            Arc::new(
                arrow_array::Decimal128Array::from_iter_values(vals)
                    .with_precision_and_scale(*p, *s)?,
            )
        }
        DataType::Utf8 if ext == Some("arrow.json") => {
            Arc::new(arrow_array::StringArray::from_iter_values(
                ids.iter().map(|&i| format!("{{\"i\": {}}}", v(i))),
            ))
        }
        DataType::Utf8 => Arc::new(arrow_array::StringArray::from_iter_values(ids.iter().map(
            |&i| {
                let s = format!("v{}", v(i));
                match limit {
                    Some(l) => s.chars().take(l.max(1)).collect(),
                    None => s,
                }
            },
        ))),
        DataType::Binary => Arc::new(arrow_array::BinaryArray::from_iter_values(
            ids.iter().map(|&i| v(i).to_le_bytes()),
        )),
        DataType::Date32 => Arc::new(arrow_array::Date32Array::from_iter_values(
            ids.iter().map(|&i| 19000 + (v(i) % 1000) as i32),
        )),
        DataType::Time64(TimeUnit::Microsecond) => {
            Arc::new(arrow_array::Time64MicrosecondArray::from_iter_values(
                ids.iter().map(|&i| (v(i) % 86_400) * 1_000_000),
            ))
        }
        DataType::Timestamp(TimeUnit::Microsecond, tz) => Arc::new(
            arrow_array::TimestampMicrosecondArray::from_iter_values(
                ids.iter()
                    .map(|&i| 1_700_000_000_000_000 + v(i) * 1_000_000),
            )
            .with_timezone_opt(tz.clone()),
        ),
        DataType::Interval(IntervalUnit::MonthDayNano) => {
            Arc::new(arrow_array::IntervalMonthDayNanoArray::from_iter_values(
                ids.iter()
                    .map(|&i| IntervalMonthDayNanoType::make_value(0, (v(i) % 30) as i32, 0)),
            ))
        }
        DataType::FixedSizeBinary(w) => {
            let mut b = FixedSizeBinaryBuilder::with_capacity(n, *w);
            for &i in ids {
                let mut u = vec![0u8; *w as usize];
                let bytes = v(i).to_be_bytes();
                let k = bytes.len().min(u.len());
                let len = u.len();
                u[len - k..].copy_from_slice(&bytes[bytes.len() - k..]);
                b.append_value(&u)?;
            }
            Arc::new(b.finish())
        }
        DataType::List(item) => {
            let inner: Vec<i64> = ids.iter().flat_map(|&i| [v(i), v(i) + 1]).collect();
            let values = gen_column(item, &inner, None)?;
            let offsets = OffsetBuffer::from_lengths(std::iter::repeat_n(2, n));
            Arc::new(arrow_array::ListArray::try_new(
                item.clone(),
                offsets,
                values,
                None,
            )?)
        }
        dt => {
            return Err(ArrowError::InvalidArgumentError(format!(
                "no generated values of type {dt}"
            )))
        }
    })
}
