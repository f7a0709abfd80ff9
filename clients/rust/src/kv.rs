//! Primary-key tables: the key and row encodings of `docs/format/kv.md`
//! (Go `kv/kvcodec`; `testdata/kv.json` checks them byte for byte),
//! `lookup` and deletes.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::*;
use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, IntervalUnit, SchemaRef, TimeUnit};

use crate::client::{do_action, ActionError, Client, Failure};
use crate::error::{Class, Error, Result, StatusError};
use crate::routing;
use crate::table::Table;
use crate::wire;

const ROW_FORMAT_V1: u8 = 1;
const ROW_FORMAT_V2: u8 = 2;
const OP_DELETE: u8 = 4;

fn schema_err(message: String) -> Error {
    Error::Schema {
        message,
        sqlstate: None,
    }
}

/// Appends the order-preserving key encoding of `arr[i]` (not null).
pub(crate) fn append_key(dst: &mut Vec<u8>, arr: &dyn Array, i: usize) -> Result<()> {
    if arr.is_null(i) {
        return Err(Error::Schema {
            message: "a primary-key value is null".into(),
            sqlstate: Some("23502".into()),
        });
    }
    macro_rules! signed {
        ($t:ty, $u:ty) => {{
            let v = arr.as_primitive::<$t>().value(i) as $u;
            dst.extend_from_slice(&(v ^ (1 << (<$u>::BITS - 1))).to_be_bytes());
        }};
    }
    macro_rules! unsigned {
        ($t:ty) => {{
            dst.extend_from_slice(&arr.as_primitive::<$t>().value(i).to_be_bytes());
        }};
    }
    let bytes_key = |dst: &mut Vec<u8>, b: &[u8]| {
        for &c in b {
            if c == 0 {
                dst.extend_from_slice(&[0x00, 0xFF]);
            } else {
                dst.push(c);
            }
        }
        dst.extend_from_slice(&[0x00, 0x01]);
    };
    match arr.data_type() {
        DataType::Boolean => dst.push(arr.as_boolean().value(i) as u8),
        DataType::Int8 => signed!(Int8Type, u8),
        DataType::Int16 => signed!(Int16Type, u16),
        DataType::Int32 => signed!(Int32Type, u32),
        DataType::Int64 => signed!(Int64Type, u64),
        DataType::Date32 => signed!(Date32Type, u32),
        DataType::Date64 => signed!(Date64Type, u64),
        DataType::Time32(TimeUnit::Second) => signed!(Time32SecondType, u32),
        DataType::Time32(_) => signed!(Time32MillisecondType, u32),
        DataType::Time64(TimeUnit::Nanosecond) => signed!(Time64NanosecondType, u64),
        DataType::Time64(_) => signed!(Time64MicrosecondType, u64),
        DataType::Timestamp(TimeUnit::Second, _) => signed!(TimestampSecondType, u64),
        DataType::Timestamp(TimeUnit::Millisecond, _) => signed!(TimestampMillisecondType, u64),
        DataType::Timestamp(TimeUnit::Microsecond, _) => signed!(TimestampMicrosecondType, u64),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => signed!(TimestampNanosecondType, u64),
        DataType::UInt8 => unsigned!(UInt8Type),
        DataType::UInt16 => unsigned!(UInt16Type),
        DataType::UInt32 => unsigned!(UInt32Type),
        DataType::UInt64 => unsigned!(UInt64Type),
        DataType::Float32 | DataType::Float64 => {
            let f = match arr.data_type() {
                DataType::Float32 => arr.as_primitive::<Float32Type>().value(i) as f64,
                _ => arr.as_primitive::<Float64Type>().value(i),
            };
            let mut bits = if f == 0.0 {
                0
            } else if f.is_nan() {
                0x7FF8_0000_0000_0001 // Go's math.NaN()
            } else {
                f.to_bits()
            };
            if bits & (1 << 63) != 0 {
                bits = !bits;
            } else {
                bits ^= 1 << 63;
            }
            dst.extend_from_slice(&bits.to_be_bytes());
        }
        DataType::Decimal128(_, _) => {
            let v = arr.as_primitive::<Decimal128Type>().value(i) as u128;
            dst.extend_from_slice(&(v ^ (1 << 127)).to_be_bytes());
        }
        DataType::Interval(IntervalUnit::MonthDayNano) => {
            let v = arr.as_primitive::<IntervalMonthDayNanoType>().value(i);
            dst.extend_from_slice(&((v.months as u32) ^ (1 << 31)).to_be_bytes());
            dst.extend_from_slice(&((v.days as u32) ^ (1 << 31)).to_be_bytes());
            dst.extend_from_slice(&((v.nanoseconds as u64) ^ (1 << 63)).to_be_bytes());
        }
        DataType::Utf8 => bytes_key(dst, arr.as_string::<i32>().value(i).as_bytes()),
        DataType::LargeUtf8 => bytes_key(dst, arr.as_string::<i64>().value(i).as_bytes()),
        DataType::Binary => bytes_key(dst, arr.as_binary::<i32>().value(i)),
        DataType::LargeBinary => bytes_key(dst, arr.as_binary::<i64>().value(i)),
        DataType::FixedSizeBinary(_) => dst.extend_from_slice(arr.as_fixed_size_binary().value(i)),
        dt => {
            return Err(schema_err(format!(
                "a {dt} column cannot be a primary-key column"
            )))
        }
    }
    Ok(())
}

fn take<'a>(src: &mut &'a [u8], n: usize, what: &str) -> Result<&'a [u8]> {
    if src.len() < n {
        return Err(Error::Protocol(format!("bad row: {what} ends early")));
    }
    let (head, rest) = src.split_at(n);
    *src = rest;
    Ok(head)
}

fn uvarint(src: &mut &[u8]) -> Result<u64> {
    let mut v = 0u64;
    for (i, &b) in src.iter().enumerate().take(10) {
        v |= ((b & 0x7f) as u64) << (7 * i);
        if b < 0x80 {
            *src = &src[i + 1..];
            return Ok(v);
        }
    }
    Err(Error::Protocol("bad row: uvarint".into()))
}

fn le<const N: usize>(src: &mut &[u8], what: &str) -> Result<[u8; N]> {
    let b = take(src, N, what)?;
    let mut out = [0u8; N];
    out.copy_from_slice(b);
    Ok(out)
}

/// Reads one non-null value of type `dt` from the front of `src` into `b`.
fn decode_value(dt: &DataType, b: &mut dyn ArrayBuilder, src: &mut &[u8]) -> Result<()> {
    fn cast<'b, T: 'static>(b: &'b mut dyn ArrayBuilder, dt: &DataType) -> Result<&'b mut T> {
        b.as_any_mut()
            .downcast_mut::<T>()
            .ok_or_else(|| Error::Protocol(format!("no builder for {dt}")))
    }
    macro_rules! prim {
        ($bt:ty, $n:literal, $conv:expr) => {{
            let v = le::<$n>(src, "value")?;
            cast::<$bt>(b, dt)?.append_value($conv(v));
        }};
    }
    match dt {
        DataType::Boolean => {
            let v = take(src, 1, "boolean")?[0];
            if v > 1 {
                return Err(Error::Protocol("bad row: boolean".into()));
            }
            cast::<BooleanBuilder>(b, dt)?.append_value(v == 1);
        }
        DataType::Int8 => prim!(Int8Builder, 1, i8::from_le_bytes),
        DataType::Int16 => prim!(Int16Builder, 2, i16::from_le_bytes),
        DataType::Int32 => prim!(Int32Builder, 4, i32::from_le_bytes),
        DataType::Int64 => prim!(Int64Builder, 8, i64::from_le_bytes),
        DataType::UInt8 => prim!(UInt8Builder, 1, u8::from_le_bytes),
        DataType::UInt16 => prim!(UInt16Builder, 2, u16::from_le_bytes),
        DataType::UInt32 => prim!(UInt32Builder, 4, u32::from_le_bytes),
        DataType::UInt64 => prim!(UInt64Builder, 8, u64::from_le_bytes),
        DataType::Float32 => prim!(Float32Builder, 4, f32::from_le_bytes),
        DataType::Float64 => prim!(Float64Builder, 8, f64::from_le_bytes),
        DataType::Date32 => prim!(Date32Builder, 4, i32::from_le_bytes),
        DataType::Date64 => prim!(Date64Builder, 8, i64::from_le_bytes),
        DataType::Time32(TimeUnit::Second) => prim!(Time32SecondBuilder, 4, i32::from_le_bytes),
        DataType::Time32(_) => prim!(Time32MillisecondBuilder, 4, i32::from_le_bytes),
        DataType::Time64(TimeUnit::Nanosecond) => {
            prim!(Time64NanosecondBuilder, 8, i64::from_le_bytes)
        }
        DataType::Time64(_) => prim!(Time64MicrosecondBuilder, 8, i64::from_le_bytes),
        DataType::Timestamp(TimeUnit::Second, _) => {
            prim!(TimestampSecondBuilder, 8, i64::from_le_bytes)
        }
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            prim!(TimestampMillisecondBuilder, 8, i64::from_le_bytes)
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            prim!(TimestampMicrosecondBuilder, 8, i64::from_le_bytes)
        }
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            prim!(TimestampNanosecondBuilder, 8, i64::from_le_bytes)
        }
        DataType::Decimal128(_, _) => {
            let lo = u64::from_le_bytes(le::<8>(src, "decimal")?);
            let hi = i64::from_le_bytes(le::<8>(src, "decimal")?);
            cast::<Decimal128Builder>(b, dt)?.append_value(((hi as i128) << 64) | lo as i128);
        }
        DataType::Interval(IntervalUnit::MonthDayNano) => {
            let months = i32::from_le_bytes(le::<4>(src, "interval")?);
            let days = i32::from_le_bytes(le::<4>(src, "interval")?);
            let nanos = i64::from_le_bytes(le::<8>(src, "interval")?);
            cast::<IntervalMonthDayNanoBuilder>(b, dt)?
                .append_value(IntervalMonthDayNanoType::make_value(months, days, nanos));
        }
        DataType::Utf8 | DataType::Binary | DataType::LargeUtf8 | DataType::LargeBinary => {
            let n = uvarint(src)? as usize;
            let v = take(src, n, "bytes")?;
            match dt {
                DataType::Utf8 => cast::<StringBuilder>(b, dt)?.append_value(
                    std::str::from_utf8(v)
                        .map_err(|e| Error::Protocol(format!("bad row: text: {e}")))?,
                ),
                DataType::LargeUtf8 => cast::<LargeStringBuilder>(b, dt)?.append_value(
                    std::str::from_utf8(v)
                        .map_err(|e| Error::Protocol(format!("bad row: text: {e}")))?,
                ),
                DataType::Binary => cast::<BinaryBuilder>(b, dt)?.append_value(v),
                _ => cast::<LargeBinaryBuilder>(b, dt)?.append_value(v),
            }
        }
        DataType::FixedSizeBinary(w) => {
            let v = take(src, *w as usize, "fixed-size binary")?;
            cast::<FixedSizeBinaryBuilder>(b, dt)?.append_value(v)?;
        }
        DataType::List(item) => {
            let lb = cast::<ListBuilder<Box<dyn ArrayBuilder>>>(b, dt)?;
            let n = uvarint(src)? as usize;
            let nb = n.div_ceil(8);
            if nb > src.len() {
                return Err(Error::Protocol("bad row: list length".into()));
            }
            let bitmap = take(src, nb, "list null bitmap")?.to_vec();
            for j in 0..n {
                if bitmap[j / 8] & (1 << (j % 8)) != 0 {
                    append_null(item.data_type(), lb.values().as_mut())?;
                } else {
                    decode_value(item.data_type(), lb.values().as_mut(), src)?;
                }
            }
            lb.append(true);
        }
        dt => {
            return Err(Error::Protocol(format!(
                "rows of type {dt} cannot be decoded"
            )))
        }
    }
    Ok(())
}

/// Appends a null to a builder made by `make_builder` for `dt`.
fn append_null(dt: &DataType, b: &mut dyn ArrayBuilder) -> Result<()> {
    macro_rules! nulls {
        ($($bt:ty),*) => {{
            let any = b.as_any_mut();
            $(if let Some(x) = any.downcast_mut::<$bt>() { x.append_null(); return Ok(()); })*
        }};
    }
    nulls!(
        BooleanBuilder,
        Int8Builder,
        Int16Builder,
        Int32Builder,
        Int64Builder,
        UInt8Builder,
        UInt16Builder,
        UInt32Builder,
        UInt64Builder,
        Float32Builder,
        Float64Builder,
        Date32Builder,
        Date64Builder,
        Time32SecondBuilder,
        Time32MillisecondBuilder,
        Time64MicrosecondBuilder,
        Time64NanosecondBuilder,
        TimestampSecondBuilder,
        TimestampMillisecondBuilder,
        TimestampMicrosecondBuilder,
        TimestampNanosecondBuilder,
        Decimal128Builder,
        IntervalMonthDayNanoBuilder,
        StringBuilder,
        LargeStringBuilder,
        BinaryBuilder,
        LargeBinaryBuilder,
        FixedSizeBinaryBuilder,
        ListBuilder<Box<dyn ArrayBuilder>>
    );
    Err(Error::Protocol(format!("no builder for {dt}")))
}

/// Decodes rows of a table into a batch of its schema. `stored` are the
/// fields of the columns rows hold (the dropped ones included, whose values
/// are decoded and left out: `visible` are the others' indexes); `created`
/// is the number of columns the table was created with; `missing` the
/// values of added columns that rows stored before them lack (`None`:
/// NULL).
pub(crate) struct RowDecoder {
    schema: SchemaRef,
    stored: SchemaRef,
    visible: Vec<usize>,
    created: usize,
    missing: Vec<Option<ArrayRef>>,
}

impl RowDecoder {
    pub fn new(table: &Table) -> Result<Self> {
        let cols = table.stored_columns();
        let created = cols
            .iter()
            .rposition(|(c, _)| !c.added)
            .map(|i| i + 1)
            .unwrap_or(0);
        let fields = cols
            .iter()
            .map(|(c, _)| crate::schema::field(&c.name, &c.sql_type, c.not_null))
            .collect::<Result<Vec<_>>>()?;
        let missing = cols
            .iter()
            .zip(&fields)
            .map(|((c, _), f)| match &c.missing {
                Some(text) if c.added => missing_value(f.data_type(), text).map(Some),
                _ => Ok(None),
            })
            .collect::<Result<_>>()?;
        let visible = cols
            .iter()
            .enumerate()
            .filter(|(_, (_, dropped))| !dropped)
            .map(|(i, _)| i)
            .collect();
        Ok(RowDecoder {
            schema: table.schema(),
            stored: Arc::new(arrow_schema::Schema::new(fields)),
            visible,
            created,
            missing,
        })
    }

    #[cfg(test)]
    fn for_schema(schema: SchemaRef) -> Self {
        let n = schema.fields().len();
        RowDecoder {
            stored: schema.clone(),
            schema,
            visible: (0..n).collect(),
            created: n,
            missing: vec![None; n],
        }
    }

    pub fn decode(&self, rows: &[&[u8]]) -> Result<RecordBatch> {
        let fields = self.stored.fields();
        let mut builders: Vec<Box<dyn ArrayBuilder>> = fields
            .iter()
            .map(|f| make_builder(f.data_type(), rows.len()))
            .collect();
        for row in rows {
            let mut src = *row;
            let format = take(&mut src, 1, "row format")?[0];
            let ncols = match format {
                ROW_FORMAT_V1 => self.created,
                ROW_FORMAT_V2 => uvarint(&mut src)? as usize,
                f => return Err(Error::Protocol(format!("bad row: format {f}"))),
            };
            if ncols < self.created {
                return Err(Error::Protocol(format!(
                    "bad row: {ncols} columns, the table was created with {}",
                    self.created
                )));
            }
            if ncols > fields.len() {
                return Err(Error::Schema {
                    message: format!(
                        "a row of {ncols} columns for a table of {}: the table has new columns",
                        fields.len()
                    ),
                    sqlstate: None,
                });
            }
            let bitmap = take(&mut src, ncols.div_ceil(8), "null bitmap")?;
            for (n, f) in fields.iter().enumerate().take(ncols) {
                if bitmap[n / 8] & (1 << (n % 8)) != 0 {
                    append_null(f.data_type(), builders[n].as_mut())?;
                } else {
                    decode_value(f.data_type(), builders[n].as_mut(), &mut src)?;
                }
            }
            if !src.is_empty() {
                return Err(Error::Protocol(format!(
                    "bad row: {} trailing bytes",
                    src.len()
                )));
            }
            for n in ncols..fields.len() {
                match &self.missing[n] {
                    None => append_null(fields[n].data_type(), builders[n].as_mut())?,
                    Some(arr) => {
                        let data = arr.to_data();
                        let mut enc = Vec::new();
                        let _ = &data;
                        // Re-decode the one-value array through the row
                        // path: encode it as a format-1 value.
                        encode_value(&mut enc, arr.as_ref(), 0)?;
                        decode_value(
                            fields[n].data_type(),
                            builders[n].as_mut(),
                            &mut enc.as_slice(),
                        )?;
                    }
                }
            }
        }
        let mut cols: Vec<Option<ArrayRef>> =
            builders.iter_mut().map(|b| Some(b.finish())).collect();
        let cols: Vec<ArrayRef> = self
            .visible
            .iter()
            .map(|&i| cols[i].take().expect("a stored column once"))
            .collect();
        Ok(RecordBatch::try_new(self.schema.clone(), cols)?)
    }
}

/// Encodes one non-null scalar value in the row format (for missing
/// values).
fn encode_value(dst: &mut Vec<u8>, arr: &dyn Array, i: usize) -> Result<()> {
    match arr.data_type() {
        DataType::Boolean => dst.push(arr.as_boolean().value(i) as u8),
        DataType::Int16 => {
            dst.extend_from_slice(&arr.as_primitive::<Int16Type>().value(i).to_le_bytes())
        }
        DataType::Int32 => {
            dst.extend_from_slice(&arr.as_primitive::<Int32Type>().value(i).to_le_bytes())
        }
        DataType::Int64 => {
            dst.extend_from_slice(&arr.as_primitive::<Int64Type>().value(i).to_le_bytes())
        }
        DataType::Float32 => {
            dst.extend_from_slice(&arr.as_primitive::<Float32Type>().value(i).to_le_bytes())
        }
        DataType::Float64 => {
            dst.extend_from_slice(&arr.as_primitive::<Float64Type>().value(i).to_le_bytes())
        }
        DataType::Utf8 => {
            let s = arr.as_string::<i32>().value(i);
            routing::append_uvarint(dst, s.len() as u64);
            dst.extend_from_slice(s.as_bytes());
        }
        dt => return Err(Error::Protocol(format!("missing value of type {dt}"))),
    }
    Ok(())
}

/// The one-value array of an added column's missing value, given as SQL
/// text. Only the common types are read; others fail.
fn missing_value(dt: &DataType, text: &str) -> Result<ArrayRef> {
    let bad = || Error::Protocol(format!("missing value {text:?} of a {dt} column"));
    Ok(match dt {
        DataType::Boolean => Arc::new(arrow_array::BooleanArray::from(vec![match text {
            "true" | "t" => true,
            "false" | "f" => false,
            _ => return Err(bad()),
        }])),
        DataType::Int16 => Arc::new(arrow_array::Int16Array::from(vec![text
            .parse::<i16>()
            .map_err(|_| bad())?])),
        DataType::Int32 => Arc::new(arrow_array::Int32Array::from(vec![text
            .parse::<i32>()
            .map_err(|_| bad())?])),
        DataType::Int64 => Arc::new(arrow_array::Int64Array::from(vec![text
            .parse::<i64>()
            .map_err(|_| bad())?])),
        DataType::Float32 => Arc::new(arrow_array::Float32Array::from(vec![text
            .parse::<f32>()
            .map_err(|_| bad())?])),
        DataType::Float64 => Arc::new(arrow_array::Float64Array::from(vec![text
            .parse::<f64>()
            .map_err(|_| bad())?])),
        DataType::Utf8 => Arc::new(arrow_array::StringArray::from(vec![text])),
        _ => return Err(bad()),
    })
}

/// Where each key of a batch of keys goes: its bucket id and encoded key;
/// `None` for a key of a partition that does not exist.
async fn route_keys(
    client: &Client,
    table: &mut Arc<Table>,
    keys: &RecordBatch,
) -> Result<Vec<Option<(u64, Vec<u8>)>>> {
    let schema = keys.schema();
    let col = |name: &str| {
        schema
            .index_of(name)
            .map_err(|_| schema_err(format!("the keys have no column {name:?}")))
    };
    let pk = table
        .primary_key()
        .iter()
        .map(|k| col(k))
        .collect::<Result<Vec<_>>>()?;
    for (name, &j) in table.primary_key().iter().zip(&pk) {
        let want = table
            .column_index(name)
            .map(|c| table.schema().field(c).data_type().clone())
            .ok_or_else(|| {
                Error::Protocol(format!("primary-key column {name:?} is not a column"))
            })?;
        let got = keys.column(j).data_type();
        if got != &want {
            return Err(schema_err(format!(
                "key column {name:?} is {got}, want {want}"
            )));
        }
    }
    let bucket_cols = table
        .bucket_key()
        .iter()
        .map(|k| col(k))
        .collect::<Result<Vec<_>>>()?;
    let count = table.bucket_count();
    if count == 0 {
        return Err(Error::Protocol(format!(
            "table {:?} has no buckets",
            table.name()
        )));
    }
    let index = routing::buckets(keys, &bucket_cols, count)?;
    let part_col = table.partition_by().map(col).transpose()?;
    let mut refreshed = false;
    let mut out = Vec::with_capacity(keys.num_rows());
    for (i, &bucket_index) in index.iter().enumerate() {
        let part = part_col
            .map(|c| routing::partition_value(keys.column(c).as_ref(), i))
            .transpose()?;
        let mut ids = table.buckets_of(part.as_deref()).map(<[u64]>::to_vec);
        if ids.is_none() && !refreshed {
            // The partition may be newer than the cached description.
            *table = client.describe(table.name()).await?;
            refreshed = true;
            ids = table.buckets_of(part.as_deref()).map(<[u64]>::to_vec);
        }
        let Some(ids) = ids else {
            out.push(None);
            continue;
        };
        let id = *ids.get(bucket_index).ok_or_else(|| {
            Error::Protocol(format!(
                "a partition of {} buckets, want {count}",
                ids.len()
            ))
        })?;
        let mut key = Vec::with_capacity(16);
        for &j in &pk {
            append_key(&mut key, keys.column(j).as_ref(), i)?;
        }
        out.push(Some((id, key)));
    }
    Ok(out)
}

/// Groups routed keys by bucket, keeping each key's position.
fn by_bucket(routed: Vec<Option<(u64, Vec<u8>)>>) -> HashMap<u64, (Vec<usize>, Vec<Vec<u8>>)> {
    let mut groups: HashMap<u64, (Vec<usize>, Vec<Vec<u8>>)> = HashMap::new();
    for (i, r) in routed.into_iter().enumerate() {
        if let Some((bucket, key)) = r {
            let g = groups.entry(bucket).or_default();
            g.0.push(i);
            g.1.push(key);
        }
    }
    groups
}

impl Client {
    /// The rows of a primary-key table whose keys are the rows of `keys`:
    /// one row per key found, in the order of `keys`, with every column;
    /// keys without a row are left out.
    ///
    /// `keys` has the primary-key columns, by name, with the table's Arrow
    /// types (other columns are ignored). Each bucket's keys are looked up
    /// at its leader with one `lookup` action, answered from one
    /// consistent state of that bucket; buckets are read independently.
    ///
    /// ```no_run
    /// # async fn f(client: mink_client::Client) -> mink_client::Result<()> {
    /// use std::sync::Arc;
    /// use arrow_array::{Int64Array, RecordBatch};
    /// let keys = RecordBatch::try_from_iter([("id", Arc::new(Int64Array::from(vec![1, 2])) as _)])?;
    /// let rows = client.lookup("accounts", &keys).await?;
    /// println!("{} of 2 found", rows.num_rows());
    /// # Ok(()) }
    /// ```
    pub async fn lookup(&self, table: &str, keys: &RecordBatch) -> Result<RecordBatch> {
        let mut t = self.cached_table(table).await?;
        if !t.is_primary_key_table() {
            return Err(Error::WrongKind(format!(
                "table {table:?} has no primary key"
            )));
        }
        let routed = route_keys(self, &mut t, keys).await?;
        let groups = by_bucket(routed);
        let lookups = groups.into_iter().map(|(bucket, (pos, keys))| async move {
            let (rows, tag) = self.lookup_bucket(table, bucket, keys).await?;
            Ok::<_, Error>((pos, rows, tag))
        });
        let mut found: Vec<Option<Vec<u8>>> = vec![None; keys.num_rows()];
        // A node answered under another schema than the described one: a
        // column was dropped or renamed since, which rows do not show.
        let mut stale = false;
        for r in futures::future::join_all(lookups).await {
            let (pos, rows, tag) = r?;
            stale |= !tag.is_empty() && tag != t.schema_tag();
            for (p, row) in pos.into_iter().zip(rows) {
                found[p] = row;
            }
        }
        let rows: Vec<&[u8]> = found.iter().flatten().map(Vec::as_slice).collect();
        if stale {
            let t = self.describe(table).await?;
            return RowDecoder::new(&t)?.decode(&rows);
        }
        match RowDecoder::new(&t)?.decode(&rows) {
            Err(Error::Schema { .. }) => {
                // The table gained columns since it was described.
                let t = self.describe(table).await?;
                RowDecoder::new(&t)?.decode(&rows)
            }
            r => r,
        }
    }

    async fn lookup_bucket(
        &self,
        table: &str,
        bucket: u64,
        keys: Vec<Vec<u8>>,
    ) -> Result<(Vec<Option<Vec<u8>>>, String)> {
        let n = keys.len();
        let body = serde_json::to_vec(&wire::LookupRequest { bucket, keys })
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let mut r = self.retrier(table, bucket);
        loop {
            let (addr, mut conn) = r.leader().await?;
            match do_action(&mut conn, wire::ACTION_LOOKUP, body.clone()).await {
                Ok(b) => {
                    let res: wire::LookupResult = serde_json::from_slice(&b)
                        .map_err(|e| Error::Protocol(format!("lookup result: {e}")))?;
                    if res.rows.len() != n {
                        return Err(Error::Protocol(format!(
                            "bucket {bucket} at {addr}: {n} keys looked up, {} answers",
                            res.rows.len()
                        )));
                    }
                    return Ok((res.rows, res.schema_tag));
                }
                // A lookup changes nothing: any failure to reach the leader
                // is retried.
                Err(ActionError::Status(mut st)) => {
                    if st.info.is_none()
                        && matches!(st.code, tonic::Code::Unknown | tonic::Code::Cancelled)
                    {
                        st.code = tonic::Code::Unavailable;
                    }
                    r.failed(Failure::Retry(st)).await?
                }
            }
        }
    }

    /// Deletes the rows of a primary-key table whose keys are the rows of
    /// `keys` (as in [`Client::lookup`]) and returns how many rows were
    /// deleted. Each bucket's keys are one atomic write at its leader;
    /// buckets are independent. Keys without a row are no-ops. A delete is
    /// retried only when the leader certainly did not run it (NotLeader,
    /// BUCKET_UNAVAILABLE, a node that could not be reached); a connection
    /// that breaks during the call is [`Error::OutcomeUnknown`].
    ///
    /// ```no_run
    /// # async fn f(client: mink_client::Client) -> mink_client::Result<()> {
    /// use std::sync::Arc;
    /// use arrow_array::{Int64Array, RecordBatch};
    /// let keys = RecordBatch::try_from_iter([("id", Arc::new(Int64Array::from(vec![1, 2])) as _)])?;
    /// let deleted = client.delete("accounts", &keys).await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete(&self, table: &str, keys: &RecordBatch) -> Result<u64> {
        let mut t = self.cached_table(table).await?;
        if !t.is_primary_key_table() {
            return Err(Error::WrongKind(format!(
                "table {table:?} has no primary key"
            )));
        }
        let routed = route_keys(self, &mut t, keys).await?;
        let deletes = by_bucket(routed)
            .into_iter()
            .map(|(bucket, (_, keys))| async move {
                let req = wire::KvWriteRequest {
                    bucket,
                    writes: keys
                        .into_iter()
                        .map(|key| wire::KvWrite { op: OP_DELETE, key })
                        .collect(),
                };
                self.kv_write(table, bucket, req).await
            });
        let mut deleted = 0;
        let mut first_err = None;
        for r in futures::future::join_all(deletes).await {
            match r {
                Ok(n) => deleted += n,
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            None => Ok(deleted),
            Some(e) => Err(e),
        }
    }

    async fn kv_write(&self, table: &str, bucket: u64, req: wire::KvWriteRequest) -> Result<u64> {
        let body = serde_json::to_vec(&req).map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let mut r = self.retrier(table, bucket);
        loop {
            let (_, mut conn) = r.leader().await?;
            match do_action(&mut conn, wire::ACTION_KV_WRITE, body.clone()).await {
                Ok(b) => {
                    let res: wire::KvWriteResult = serde_json::from_slice(&b)
                        .map_err(|e| Error::Protocol(format!("kv-write result: {e}")))?;
                    return Ok(res.records.len() as u64);
                }
                Err(ActionError::Status(st)) => match st.class() {
                    Class::Redirect { .. } | Class::BucketUnavailable | Class::Unauthenticated => {
                        r.failed(Failure::Retry(st)).await?
                    }
                    Class::Unreachable if not_connected(&st) => {
                        r.failed(Failure::Retry(st)).await?
                    }
                    Class::Unreachable | Class::OutcomeUnknown => {
                        return Err(Error::OutcomeUnknown(st.to_string()))
                    }
                    Class::Final => return Err(st.into_error(table)),
                },
            }
        }
    }
}

/// Whether an UNAVAILABLE status is gRPC's failure to connect at all (so
/// the request was never written).
fn not_connected(st: &StatusError) -> bool {
    let m = st.message.to_ascii_lowercase();
    m.contains("tcp connect error")
        || m.contains("connection refused")
        || m.contains("connect timeout")
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_ipc::reader::StreamReader;
    use base64::Engine;
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Vector {
        columns: Vec<Col>,
        primary_key: Vec<usize>,
        batch: String,
        keys: Vec<String>,
        rows: Vec<String>,
    }

    #[derive(Deserialize)]
    struct Col {
        name: String,
        #[serde(rename = "type")]
        sql_type: String,
    }

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn keys_and_rows_match_go_byte_for_byte() {
        let vs: Vec<Vector> = serde_json::from_str(include_str!("../testdata/kv.json")).unwrap();
        assert!(!vs.is_empty());
        for v in vs {
            let ipc = base64::engine::general_purpose::STANDARD
                .decode(&v.batch)
                .unwrap();
            let batch = StreamReader::try_new(std::io::Cursor::new(ipc), None)
                .unwrap()
                .next()
                .unwrap()
                .unwrap();
            let fields: Vec<_> = v
                .columns
                .iter()
                .map(|c| crate::schema::field(&c.name, &c.sql_type, false).unwrap())
                .collect();
            let schema = Arc::new(arrow_schema::Schema::new(fields));
            for (i, want) in v.keys.iter().enumerate() {
                let mut key = Vec::new();
                for &c in &v.primary_key {
                    append_key(&mut key, batch.column(c).as_ref(), i).unwrap();
                }
                assert_eq!(
                    key,
                    unhex(want),
                    "key of row {i} of {:?}",
                    v.columns[0].name
                );
            }
            let rows: Vec<Vec<u8>> = v.rows.iter().map(|r| unhex(r)).collect();
            let refs: Vec<&[u8]> = rows.iter().map(Vec::as_slice).collect();
            let got = RowDecoder::for_schema(schema).decode(&refs).unwrap();
            assert_eq!(got.num_rows(), batch.num_rows());
            for c in 0..batch.num_columns() {
                assert_eq!(
                    got.column(c).to_data(),
                    batch.column(c).to_data(),
                    "column {} ({})",
                    v.columns[c].name,
                    v.columns[c].sql_type
                );
            }
        }
    }

    #[test]
    fn bad_rows_are_errors_not_panics() {
        let schema = Arc::new(arrow_schema::Schema::new(vec![
            crate::schema::field("a", "bigint", false).unwrap(),
            crate::schema::field("b", "text", false).unwrap(),
        ]));
        let d = RowDecoder::for_schema(schema);
        for bad in [
            &b""[..],
            b"\x03",
            b"\x01",
            b"\x01\x00\x01",
            b"\x01\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09",
            b"\x02\x09\x00\x00",
            b"\x02\x01\x00\x07\x00\x00\x00\x00\x00\x00\x00",
        ] {
            assert!(d.decode(&[bad]).is_err(), "{bad:?}");
        }
        let null_key: ArrayRef = Arc::new(arrow_array::Int64Array::from(vec![None::<i64>]));
        assert!(append_key(&mut Vec::new(), null_key.as_ref(), 0).is_err());
    }
    /// A row stored before `ALTER TABLE … DROP COLUMN` holds the dropped
    /// column's value at its place, one stored after holds NULL there:
    /// both decode to the visible columns only.
    #[test]
    fn rows_skip_dropped_columns() {
        use crate::wire::{ColumnInfo, DroppedInfo, TableInfo};
        let col = |name: &str, t: &str| ColumnInfo {
            name: name.into(),
            sql_type: t.into(),
            ..Default::default()
        };
        let table = Table::from_info(TableInfo {
            name: "t".into(),
            columns: vec![col("id", "bigint"), col("v", "text")],
            primary_key: vec!["id".into()],
            dropped: vec![DroppedInfo {
                position: 1,
                column: col("........pg.dropped.2........", "text"),
            }],
            ..Default::default()
        })
        .unwrap();
        let ids = arrow_array::Int64Array::from(vec![1, 2]);
        let texts = arrow_array::StringArray::from(vec!["gone", "v1"]);
        // id 1, gone "gone", v "v1"; id 2, NULL, "v1".
        let mut before = vec![ROW_FORMAT_V1, 0];
        encode_value(&mut before, &ids, 0).unwrap();
        encode_value(&mut before, &texts, 0).unwrap();
        encode_value(&mut before, &texts, 1).unwrap();
        let mut after = vec![ROW_FORMAT_V1, 0b010];
        encode_value(&mut after, &ids, 1).unwrap();
        encode_value(&mut after, &texts, 1).unwrap();
        let got = RowDecoder::new(&table)
            .unwrap()
            .decode(&[&before, &after])
            .unwrap();
        assert_eq!(got.schema(), table.schema());
        assert_eq!(got.num_columns(), 2);
        let id = got.column(0).as_primitive::<Int64Type>();
        let v = got.column(1).as_string::<i32>();
        assert_eq!((id.value(0), v.value(0)), (1, "v1"));
        assert_eq!((id.value(1), v.value(1)), (2, "v1"));
    }
}
