//! The row → bucket hash, byte for byte the server's (`buckets/routing`,
//! `docs/format/routing.md`): a row's bucket is FNV-1a 64 of the canonical
//! encoding of its bucket key, modulo the table's bucket count, and a
//! partitioned table's rows go first to the partition their value's
//! canonical text names. The Go code writes the test vectors in
//! `testdata/routing.json` that the tests below check.
//!
//! Everything here is pure.

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, ArrayRef, RecordBatch, UInt32Array};
use arrow_schema::{DataType, TimeUnit};

use crate::error::{Error, Result};

const FNV_OFFSET: u64 = 14695981039346656037;
const FNV_PRIME: u64 = 1099511628211;

/// FNV-1a 64 of `key`.
///
/// ```
/// assert_eq!(mink_client::routing::hash(b""), 0xcbf29ce484222325);
/// ```
pub fn hash(key: &[u8]) -> u64 {
    let mut h = FNV_OFFSET;
    for &c in key {
        h ^= c as u64;
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// The bucket index, in `[0, buckets)`, of an encoded key.
///
/// ```
/// use mink_client::routing::{bucket_of, hash};
/// assert_eq!(bucket_of(b"key", 8), (hash(b"key") % 8) as usize);
/// ```
pub fn bucket_of(key: &[u8], buckets: usize) -> usize {
    (hash(key) % buckets.max(1) as u64) as usize
}

const TAG_NULL: u8 = 0;
const TAG_VALUE: u8 = 1;

/// Go's math.NaN(): the one NaN every NaN hashes as.
const CANONICAL_NAN: u64 = 0x7FF8_0000_0000_0001;

/// Encodes the values of one key column.
enum KeyColumn<'a> {
    Bool(&'a arrow_array::BooleanArray),
    Int(Box<dyn Fn(usize) -> i64 + 'a>, &'a dyn Array),
    Float(Box<dyn Fn(usize) -> f64 + 'a>, &'a dyn Array),
    Bytes(Box<dyn Fn(usize) -> &'a [u8] + 'a>, &'a dyn Array),
    Fixed(&'a arrow_array::FixedSizeBinaryArray),
    Decimal(&'a arrow_array::Decimal128Array, u8),
}

fn micros(unit: &TimeUnit) -> impl Fn(i64) -> i64 {
    let unit = *unit;
    move |v| match unit {
        TimeUnit::Second => v.wrapping_mul(1_000_000),
        TimeUnit::Millisecond => v.wrapping_mul(1_000),
        TimeUnit::Microsecond => v,
        TimeUnit::Nanosecond => v / 1_000,
    }
}

impl<'a> KeyColumn<'a> {
    fn new(arr: &'a ArrayRef) -> Result<Self> {
        let a: &'a dyn Array = arr.as_ref();
        macro_rules! int {
            ($t:ty) => {{
                let p = a.as_primitive::<$t>();
                KeyColumn::Int(Box::new(move |i| p.value(i) as i64), a)
            }};
        }
        Ok(match a.data_type() {
            DataType::Boolean => KeyColumn::Bool(a.as_boolean()),
            DataType::Int8 => int!(Int8Type),
            DataType::Int16 => int!(Int16Type),
            DataType::Int32 => int!(Int32Type),
            DataType::Int64 => int!(Int64Type),
            DataType::UInt8 => int!(UInt8Type),
            DataType::UInt16 => int!(UInt16Type),
            DataType::UInt32 => int!(UInt32Type),
            DataType::Date32 => int!(Date32Type),
            DataType::Float32 => {
                let p = a.as_primitive::<Float32Type>();
                KeyColumn::Float(Box::new(move |i| p.value(i) as f64), a)
            }
            DataType::Float64 => {
                let p = a.as_primitive::<Float64Type>();
                KeyColumn::Float(Box::new(move |i| p.value(i)), a)
            }
            DataType::Utf8 => {
                let s = a.as_string::<i32>();
                KeyColumn::Bytes(Box::new(move |i| s.value(i).as_bytes()), a)
            }
            DataType::LargeUtf8 => {
                let s = a.as_string::<i64>();
                KeyColumn::Bytes(Box::new(move |i| s.value(i).as_bytes()), a)
            }
            DataType::Binary => {
                let s = a.as_binary::<i32>();
                KeyColumn::Bytes(Box::new(move |i| s.value(i)), a)
            }
            DataType::LargeBinary => {
                let s = a.as_binary::<i64>();
                KeyColumn::Bytes(Box::new(move |i| s.value(i)), a)
            }
            DataType::FixedSizeBinary(_) => KeyColumn::Fixed(a.as_fixed_size_binary()),
            DataType::Time64(unit) => {
                let f = micros(unit);
                let vals: &'a [i64] = match unit {
                    TimeUnit::Nanosecond => a.as_primitive::<Time64NanosecondType>().values(),
                    _ => a.as_primitive::<Time64MicrosecondType>().values(),
                };
                KeyColumn::Int(Box::new(move |i| f(vals[i])), a)
            }
            DataType::Timestamp(unit, _) => {
                let f = micros(unit);
                let vals: &'a [i64] = timestamp_values(a);
                KeyColumn::Int(Box::new(move |i| f(vals[i])), a)
            }
            DataType::Decimal128(_, scale) => {
                KeyColumn::Decimal(a.as_primitive::<Decimal128Type>(), *scale as u8)
            }
            dt => {
                return Err(Error::InvalidArgument(format!(
                    "routing: cannot use a {dt} column as a bucket key"
                )))
            }
        })
    }

    fn array(&self) -> &dyn Array {
        match self {
            KeyColumn::Bool(a) => *a,
            KeyColumn::Int(_, a) | KeyColumn::Float(_, a) | KeyColumn::Bytes(_, a) => *a,
            KeyColumn::Fixed(a) => *a,
            KeyColumn::Decimal(a, _) => *a,
        }
    }

    fn append(&self, dst: &mut Vec<u8>, i: usize) {
        if self.array().is_null(i) {
            dst.push(TAG_NULL);
            return;
        }
        dst.push(TAG_VALUE);
        match self {
            KeyColumn::Bool(a) => dst.push(a.value(i) as u8),
            KeyColumn::Int(f, _) => dst.extend_from_slice(&f(i).to_be_bytes()),
            KeyColumn::Float(f, _) => {
                let v = f(i);
                let bits = if v == 0.0 {
                    0
                } else if v.is_nan() {
                    CANONICAL_NAN
                } else {
                    v.to_bits()
                };
                dst.extend_from_slice(&bits.to_be_bytes());
            }
            KeyColumn::Bytes(f, _) => {
                let b = f(i);
                append_uvarint(dst, b.len() as u64);
                dst.extend_from_slice(b);
            }
            KeyColumn::Fixed(a) => dst.extend_from_slice(a.value(i)),
            KeyColumn::Decimal(a, scale) => {
                dst.push(*scale);
                dst.extend_from_slice(&a.value(i).to_be_bytes());
            }
        }
    }
}

fn timestamp_values(a: &dyn Array) -> &[i64] {
    match a.data_type() {
        DataType::Timestamp(TimeUnit::Second, _) => {
            a.as_primitive::<TimestampSecondType>().values()
        }
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            a.as_primitive::<TimestampMillisecondType>().values()
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            a.as_primitive::<TimestampMicrosecondType>().values()
        }
        _ => a.as_primitive::<TimestampNanosecondType>().values(),
    }
}

/// Appends Go's `binary.AppendUvarint` of `v`.
pub(crate) fn append_uvarint(dst: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        dst.push((v as u8) | 0x80);
        v >>= 7;
    }
    dst.push(v as u8);
}

/// The encoded bucket keys of a batch's rows, built column by column.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{RecordBatch, StringArray};
/// let b = RecordBatch::try_from_iter([("s", Arc::new(StringArray::from(vec!["ab"])) as _)]).unwrap();
/// let keys = mink_client::routing::RowKeys::new(&b, &[0]).unwrap();
/// let mut key = Vec::new();
/// keys.append(&mut key, 0);
/// assert_eq!(key, [1, 2, b'a', b'b']); // value tag, uvarint length, bytes
/// ```
pub struct RowKeys<'a> {
    cols: Vec<KeyColumn<'a>>,
}

impl<'a> RowKeys<'a> {
    /// Prepares to encode the key made of `columns` (indices into `batch`).
    pub fn new(batch: &'a RecordBatch, columns: &[usize]) -> Result<Self> {
        let cols = columns
            .iter()
            .map(|&c| {
                KeyColumn::new(batch.column(c)).map_err(|e| {
                    Error::InvalidArgument(format!(
                        "column {:?}: {e}",
                        batch.schema().field(c).name()
                    ))
                })
            })
            .collect::<Result<_>>()?;
        Ok(RowKeys { cols })
    }

    /// Appends the encoded key of row `i` to `dst`.
    pub fn append(&self, dst: &mut Vec<u8>, i: usize) {
        for c in &self.cols {
            c.append(dst, i);
        }
    }
}

/// The bucket index of every row of `batch`, hashing the key `columns`.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{Int64Array, Int32Array, RecordBatch};
/// let b = RecordBatch::try_from_iter([
///     ("a", Arc::new(Int64Array::from(vec![1, 2, 42])) as _),
///     ("b", Arc::new(Int32Array::from(vec![1, 2, 42])) as _),
/// ]).unwrap();
/// let by_a = mink_client::routing::buckets(&b, &[0], 8).unwrap();
/// // Integers hash the same whatever their width.
/// assert_eq!(by_a, mink_client::routing::buckets(&b, &[1], 8).unwrap());
/// ```
pub fn buckets(batch: &RecordBatch, columns: &[usize], buckets: usize) -> Result<Vec<usize>> {
    if buckets == 0 {
        return Err(Error::InvalidArgument(
            "routing: a table of no buckets".into(),
        ));
    }
    let keys = RowKeys::new(batch, columns)?;
    let mut key = Vec::with_capacity(32);
    Ok((0..batch.num_rows())
        .map(|i| {
            key.clear();
            keys.append(&mut key, i);
            bucket_of(&key, buckets)
        })
        .collect())
}

/// The rows of a batch that go to one bucket index: `rows` are their
/// indices in the original batch (`None`: all of them, in order).
#[derive(Debug, Clone)]
pub struct Part {
    /// The bucket index (not id) in the table or partition.
    pub index: usize,
    /// The rows.
    pub batch: RecordBatch,
    /// The rows' indices in the batch that was split.
    pub rows: Option<UInt32Array>,
}

/// Splits `batch` by the bucket of each row's key, keeping row order
/// within a bucket. Buckets without rows get no part.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{Int64Array, RecordBatch};
/// let b = RecordBatch::try_from_iter([("id", Arc::new(Int64Array::from_iter_values(0..100)) as _)]).unwrap();
/// let parts = mink_client::routing::split(&b, &[0], 4).unwrap();
/// assert_eq!(parts.iter().map(|p| p.batch.num_rows()).sum::<usize>(), 100);
/// ```
pub fn split(batch: &RecordBatch, columns: &[usize], count: usize) -> Result<Vec<Part>> {
    let of = buckets(batch, columns, count)?;
    group(batch, &of, count)
}

/// Groups the rows of `batch` by `of[row]` in `[0, count)`.
pub(crate) fn group(batch: &RecordBatch, of: &[usize], count: usize) -> Result<Vec<Part>> {
    if of.len() != batch.num_rows() || of.iter().any(|&b| b >= count) {
        return Err(Error::InvalidArgument(format!(
            "routing: {} bucket indices for {} rows of {count} buckets",
            of.len(),
            batch.num_rows()
        )));
    }
    let mut counts = vec![0usize; count];
    for &b in of {
        counts[b] += 1;
    }
    if let Some(b) = counts.iter().position(|&n| n == batch.num_rows()) {
        return Ok(vec![Part {
            index: b,
            batch: batch.clone(),
            rows: None,
        }]);
    }
    let mut idx: Vec<Vec<u32>> = counts.iter().map(|&n| Vec::with_capacity(n)).collect();
    for (row, &b) in of.iter().enumerate() {
        idx[b].push(row as u32);
    }
    let mut out = Vec::new();
    for (b, rows) in idx.into_iter().enumerate() {
        if rows.is_empty() {
            continue;
        }
        let rows = UInt32Array::from(rows);
        let taken = arrow_select::take::take_record_batch(batch, &rows)?;
        out.push(Part {
            index: b,
            batch: taken,
            rows: Some(rows),
        });
    }
    Ok(out)
}

/// The canonical text of row `i` of a partition column: it names the
/// partition (`docs/flight.md`, Descriptors).
///
/// ```
/// use arrow_array::{Date32Array, TimestampMicrosecondArray};
/// use mink_client::routing::partition_value;
/// assert_eq!(partition_value(&Date32Array::from(vec![19844]), 0).unwrap(), "2024-05-01");
/// let ts = TimestampMicrosecondArray::from(vec![1_714_521_600_250_000]);
/// assert_eq!(partition_value(&ts, 0).unwrap(), "2024-05-01 00:00:00.25");
/// ```
pub fn partition_value(arr: &dyn Array, i: usize) -> Result<String> {
    if arr.is_null(i) {
        return Ok("NULL".into());
    }
    Ok(match arr.data_type() {
        DataType::Utf8 => arr.as_string::<i32>().value(i).to_string(),
        DataType::Int16 => arr.as_primitive::<Int16Type>().value(i).to_string(),
        DataType::Int32 => arr.as_primitive::<Int32Type>().value(i).to_string(),
        DataType::Int64 => arr.as_primitive::<Int64Type>().value(i).to_string(),
        DataType::Boolean => arr.as_boolean().value(i).to_string(),
        DataType::Date32 => {
            let days = arr.as_primitive::<Date32Type>().value(i);
            let d = chrono::DateTime::from_timestamp(days as i64 * 86_400, 0)
                .ok_or_else(|| Error::InvalidArgument(format!("date {days} out of range")))?;
            d.format("%Y-%m-%d").to_string()
        }
        DataType::Timestamp(unit, _) => {
            let v = timestamp_values(arr)[i];
            let (secs, nanos) = match unit {
                TimeUnit::Second => (v, 0),
                TimeUnit::Millisecond => (v.div_euclid(1_000), v.rem_euclid(1_000) * 1_000_000),
                TimeUnit::Microsecond => (v.div_euclid(1_000_000), v.rem_euclid(1_000_000) * 1_000),
                TimeUnit::Nanosecond => (v.div_euclid(1_000_000_000), v.rem_euclid(1_000_000_000)),
            };
            let t = chrono::DateTime::from_timestamp(secs, nanos as u32)
                .ok_or_else(|| Error::InvalidArgument(format!("timestamp {v} out of range")))?;
            // Go's "2006-01-02 15:04:05.999999": microseconds, trailing
            // zeros (and a bare point) dropped.
            let mut s = t.format("%Y-%m-%d %H:%M:%S").to_string();
            let micros = nanos / 1_000;
            if micros != 0 {
                let frac = format!("{micros:06}");
                s.push('.');
                s.push_str(frac.trim_end_matches('0'));
            }
            s
        }
        dt => {
            return Err(Error::InvalidArgument(format!(
                "partitioning by a {dt} column is not supported"
            )))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_ipc::reader::StreamReader;
    use base64::Engine;
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Vectors {
        /// An Arrow IPC stream (base64) of one batch with a column per
        /// type.
        batch: String,
        /// For every column, every row's encoded key (hex).
        keys: Vec<ColumnKeys>,
        /// Multi-column keys and their buckets.
        composite: Vec<Composite>,
        /// Partition values of the partitionable columns.
        partitions: Vec<ColumnPartitions>,
    }

    #[derive(Deserialize)]
    struct ColumnKeys {
        column: String,
        keys: Vec<String>,
        buckets_7: Vec<usize>,
    }

    #[derive(Deserialize)]
    struct Composite {
        columns: Vec<String>,
        buckets: usize,
        of: Vec<usize>,
    }

    #[derive(Deserialize)]
    struct ColumnPartitions {
        column: String,
        values: Vec<String>,
    }

    fn vectors() -> (RecordBatch, Vectors) {
        let text = include_str!("../testdata/routing.json");
        let v: Vectors = serde_json::from_str(text).unwrap();
        let ipc = base64::engine::general_purpose::STANDARD
            .decode(&v.batch)
            .unwrap();
        let mut rdr = StreamReader::try_new(std::io::Cursor::new(ipc), None).unwrap();
        let batch = rdr.next().unwrap().unwrap();
        (batch, v)
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|c| format!("{c:02x}")).collect()
    }

    #[test]
    fn fnv_matches_the_reference() {
        // FNV-1a 64 of "" and "a" (the published test values).
        assert_eq!(hash(b""), 0xcbf29ce484222325);
        assert_eq!(hash(b"a"), 0xaf63dc4c8601ec8c);
    }

    #[test]
    fn keys_match_go_byte_for_byte() {
        let (batch, v) = vectors();
        assert!(!v.keys.is_empty());
        for ck in &v.keys {
            let col = batch.schema().index_of(&ck.column).unwrap();
            let keys = RowKeys::new(&batch, &[col]).unwrap();
            for (i, want) in ck.keys.iter().enumerate() {
                let mut got = Vec::new();
                keys.append(&mut got, i);
                assert_eq!(&hex(&got), want, "column {} row {i}", ck.column);
            }
            assert_eq!(
                buckets(&batch, &[col], 7).unwrap(),
                ck.buckets_7,
                "column {}",
                ck.column
            );
        }
    }

    #[test]
    fn composite_keys_and_split_match_go() {
        let (batch, v) = vectors();
        for c in &v.composite {
            let cols: Vec<usize> = c
                .columns
                .iter()
                .map(|n| batch.schema().index_of(n).unwrap())
                .collect();
            assert_eq!(
                buckets(&batch, &cols, c.buckets).unwrap(),
                c.of,
                "{:?}",
                c.columns
            );
            let parts = split(&batch, &cols, c.buckets).unwrap();
            let mut seen = vec![None; batch.num_rows()];
            for p in &parts {
                let rows: Vec<u32> = match &p.rows {
                    Some(r) => r.values().to_vec(),
                    None => (0..batch.num_rows() as u32).collect(),
                };
                assert_eq!(rows.len(), p.batch.num_rows());
                assert!(rows.windows(2).all(|w| w[0] < w[1]), "row order kept");
                for r in rows {
                    seen[r as usize] = Some(p.index);
                }
            }
            let seen: Vec<usize> = seen.into_iter().map(|s| s.unwrap()).collect();
            assert_eq!(seen, c.of);
        }
    }

    #[test]
    fn partition_values_match_go() {
        let (batch, v) = vectors();
        assert!(!v.partitions.is_empty());
        for p in &v.partitions {
            let arr = batch.column(batch.schema().index_of(&p.column).unwrap());
            let got: Vec<String> = (0..batch.num_rows())
                .map(|i| partition_value(arr.as_ref(), i).unwrap())
                .collect();
            assert_eq!(got, p.values, "column {}", p.column);
        }
    }

    #[test]
    fn unsupported_key_types_are_errors() {
        let arr: ArrayRef = std::sync::Arc::new(arrow_array::UInt64Array::from(vec![1u64]));
        let batch = RecordBatch::try_from_iter([("u", arr)]).unwrap();
        assert!(matches!(
            buckets(&batch, &[0], 3),
            Err(Error::InvalidArgument(_))
        ));
        assert!(partition_value(batch.column(0).as_ref(), 0).is_err());
        let ids: ArrayRef = std::sync::Arc::new(arrow_array::Int64Array::from(vec![1i64]));
        let batch = RecordBatch::try_from_iter([("id", ids)]).unwrap();
        assert!(
            split(&batch, &[0], 0).is_err(),
            "no buckets is an error, not a panic"
        );
    }
}
