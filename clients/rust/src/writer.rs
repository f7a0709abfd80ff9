//! Writers: append to log tables and upsert into primary-key tables, both
//! as bucket-addressed DoPuts at the buckets' leaders.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arrow_array::{RecordBatch, UInt32Array};
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::FlightData;
use futures::{StreamExt, TryStreamExt};

use crate::client::{Client, Conn, Failure};
use crate::error::{Class, Error, Result, StatusError};
use crate::routing;
use crate::table::Table;
use crate::wire;

/// What became of rows that a flush did not get acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Certainly not stored: sending them again cannot store them twice.
    NotWritten,
    /// May or may not be stored (a connection broke during the call, or
    /// the server could not tell): check before sending them again.
    Unknown,
}

/// Rows of one appended batch that were not acknowledged.
#[derive(Debug, Clone)]
pub struct UnackedRows {
    /// The sequence number [`Writer::append`] returned for the batch.
    pub batch: u64,
    /// The rows' indices in that batch, ascending.
    pub rows: Vec<u32>,
    /// The bucket they were routed to.
    pub bucket: u64,
    /// Whether they may have been stored.
    pub outcome: Outcome,
}

/// The error of a flush that did not get every row acknowledged: every
/// other row of the flush is durable, exactly once.
#[derive(Debug)]
pub struct WriteError {
    /// Rows acknowledged by this flush.
    pub acknowledged: u64,
    /// The rows that were not, by batch.
    pub unacknowledged: Vec<UnackedRows>,
    /// Why, per failed bucket.
    pub causes: Vec<(u64, Error)>,
}

impl WriteError {
    /// How many rows were not acknowledged.
    pub fn unacknowledged_rows(&self) -> u64 {
        self.unacknowledged
            .iter()
            .map(|u| u.rows.len() as u64)
            .sum()
    }
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unknown: u64 = self
            .unacknowledged
            .iter()
            .filter(|u| u.outcome == Outcome::Unknown)
            .map(|u| u.rows.len() as u64)
            .sum();
        write!(
            f,
            "{} rows acknowledged, {} not ({} of them of unknown outcome)",
            self.acknowledged,
            self.unacknowledged_rows(),
            unknown
        )?;
        for (bucket, e) in &self.causes {
            write!(f, "; bucket {bucket}: {e}")?;
        }
        Ok(())
    }
}

/// What a successful flush did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flushed {
    /// Rows acknowledged (durable).
    pub rows: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Append,
    Upsert,
}

/// One batch routed to a bucket, and where its rows came from.
#[derive(Debug, Clone)]
struct Pending {
    batch: RecordBatch,
    seq: u64,
    /// The rows' indices in batch `seq`; `None`: all, in order.
    rows: Option<UInt32Array>,
}

impl Pending {
    fn rows(&self) -> Vec<u32> {
        match &self.rows {
            Some(r) => r.values().to_vec(),
            None => (0..self.batch.num_rows() as u32).collect(),
        }
    }
}

/// A writer of one table: [`Writer::append`] routes batches to buckets
/// and keeps them; [`Writer::flush`] sends every bucket's batches to its
/// leader, in parallel, and returns once every row is acknowledged.
///
/// For a log table ([`Client::append_writer`]) rows are appended; for a
/// primary-key table ([`Client::upsert_writer`]) they are upserted (each
/// row replaces its key's row; within a flush a later row of a key wins),
/// each batch one atomic write. A batch is retried only when nothing of it
/// can have been stored, so a flush that returns `Ok` stored every row
/// exactly once; one that fails says which rows were not acknowledged and
/// whether they may have been stored.
///
/// ```no_run
/// # async fn f(client: mink_client::Client, batch: arrow_array::RecordBatch) -> mink_client::Result<()> {
/// let mut w = client.append_writer("clicks").await?;
/// w.append(batch).await?;
/// let done = w.flush().await?;
/// println!("acknowledged {}", done.rows);
/// # Ok(()) }
/// ```
pub struct Writer {
    client: Client,
    table: Arc<Table>,
    mode: Mode,
    pending: BTreeMap<u64, Vec<Pending>>,
    pending_rows: usize,
    next_seq: u64,
}

impl Client {
    /// A writer that appends to a log table.
    pub async fn append_writer(&self, table: &str) -> Result<Writer> {
        let t = self.cached_table(table).await?;
        if t.is_primary_key_table() {
            return Err(Error::WrongKind(format!(
                "table {table:?} has a primary key: use upsert_writer"
            )));
        }
        Ok(self.writer(t, Mode::Append))
    }

    /// A writer that upserts into a primary-key table.
    pub async fn upsert_writer(&self, table: &str) -> Result<Writer> {
        let t = self.cached_table(table).await?;
        if !t.is_primary_key_table() {
            return Err(Error::WrongKind(format!(
                "table {table:?} has no primary key: use append_writer"
            )));
        }
        Ok(self.writer(t, Mode::Upsert))
    }

    fn writer(&self, table: Arc<Table>, mode: Mode) -> Writer {
        Writer {
            client: self.clone(),
            table,
            mode,
            pending: BTreeMap::new(),
            pending_rows: 0,
            next_seq: 0,
        }
    }
}

impl Writer {
    /// The table written.
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// Whether the writer upserts (a primary-key table) rather than
    /// appends.
    pub fn is_upsert(&self) -> bool {
        self.mode == Mode::Upsert
    }

    /// Rows appended and not flushed yet.
    pub fn pending_rows(&self) -> usize {
        self.pending_rows
    }

    /// Routes `batch` to its buckets (by partition value, creating new
    /// partitions, then by the hash of the bucket key, or the whole batch
    /// to the next bucket in turn for a table without one) and keeps it
    /// for [`Writer::flush`]. Returns the batch's sequence number, which
    /// [`UnackedRows::batch`] refers to.
    ///
    /// `batch` has the table's columns, matched by name in any order, with
    /// the Arrow types of [`Table::schema`]; the server checks them as
    /// `COPY` does.
    pub async fn append(&mut self, batch: RecordBatch) -> Result<u64> {
        let seq = self.next_seq;
        self.next_seq += 1;
        if batch.num_rows() == 0 {
            return Ok(seq);
        }
        let parts = route(&self.client, &mut self.table, &batch).await?;
        let max = self.client.config().max_message_bytes.max(1);
        for (bucket, part) in parts {
            for (batch, rows) in slice(part.batch, part.rows, max) {
                self.pending_rows += batch.num_rows();
                self.pending
                    .entry(bucket)
                    .or_default()
                    .push(Pending { batch, seq, rows });
            }
        }
        Ok(seq)
    }

    /// Sends every pending batch to its bucket's leader (the buckets in
    /// parallel, each bucket's batches in one stream) and returns once
    /// every row is acknowledged, or [`Error::Write`] saying which rows are
    /// not. Pending rows are handed over either way.
    #[must_use = "a flush that fails leaves rows unacknowledged"]
    pub async fn flush(&mut self) -> Result<Flushed> {
        let pending = std::mem::take(&mut self.pending);
        self.pending_rows = 0;
        let table = self.table.name().to_string();
        let sends = pending.into_iter().map(|(bucket, batches)| {
            let client = self.client.clone();
            let table = table.clone();
            async move { (bucket, send_bucket(&client, &table, bucket, batches).await) }
        });
        let results = futures::future::join_all(sends).await;
        let mut acknowledged = 0;
        let mut unacked = Vec::new();
        let mut causes = Vec::new();
        for (bucket, r) in results {
            acknowledged += r.acknowledged;
            if let Some((err, outcome, rest)) = r.failed {
                for p in rest {
                    unacked.push(UnackedRows {
                        batch: p.seq,
                        rows: p.rows(),
                        bucket,
                        outcome,
                    });
                }
                causes.push((bucket, err));
            }
        }
        if causes.is_empty() {
            return Ok(Flushed { rows: acknowledged });
        }
        Err(Error::Write(Box::new(WriteError {
            acknowledged,
            unacknowledged: unacked,
            causes,
        })))
    }
}

impl Writer {
    /// Deletes the rows whose keys are the rows of `keys` (as in
    /// [`Client::delete`]) and returns how many rows were deleted. Only an
    /// upsert writer deletes; it first flushes the rows appended so far, so
    /// that the deletes apply after them.
    ///
    /// ```no_run
    /// # async fn f(client: mink_client::Client, rows: arrow_array::RecordBatch, keys: arrow_array::RecordBatch) -> mink_client::Result<()> {
    /// let mut w = client.upsert_writer("accounts").await?;
    /// w.append(rows).await?;
    /// let deleted = w.delete(&keys).await?; // flushes the upserts first
    /// # Ok(()) }
    /// ```
    #[must_use = "a delete that fails may leave rows in place"]
    pub async fn delete(&mut self, keys: &RecordBatch) -> Result<u64> {
        if self.mode != Mode::Upsert {
            return Err(Error::WrongKind(format!(
                "table {:?} has no primary key: rows cannot be deleted by key",
                self.table.name()
            )));
        }
        if self.pending_rows > 0 {
            self.flush().await?;
        }
        self.client.delete(self.table.name(), keys).await
    }
}

/// Slices a part into batches of about `max` bytes at most, keeping each
/// slice's original row indices.
fn slice(
    batch: RecordBatch,
    rows: Option<UInt32Array>,
    max: usize,
) -> Vec<(RecordBatch, Option<UInt32Array>)> {
    let bytes = batch.get_array_memory_size();
    let n = batch.num_rows();
    if bytes <= max || n <= 1 {
        return vec![(batch, rows)];
    }
    let pieces = bytes.div_ceil(max).min(n);
    let per = n.div_ceil(pieces);
    (0..n)
        .step_by(per)
        .map(|off| {
            let len = per.min(n - off);
            let idx = match &rows {
                Some(r) => Some(r.slice(off, len)),
                None => Some(UInt32Array::from_iter_values(
                    off as u32..(off + len) as u32,
                )),
            };
            (batch.slice(off, len), idx)
        })
        .collect()
}

/// Splits a batch into the parts of each bucket (by id). `table` is
/// replaced when a new partition had to be created.
async fn route(
    client: &Client,
    table: &mut Arc<Table>,
    batch: &RecordBatch,
) -> Result<Vec<(u64, routing::Part)>> {
    let schema = batch.schema();
    let index_of = |name: &str| {
        schema.index_of(name).map_err(|_| Error::Schema {
            message: format!("the batch has no column {name:?}"),
            sqlstate: None,
        })
    };
    let key_cols = table
        .bucket_key()
        .iter()
        .map(|k| index_of(k))
        .collect::<Result<Vec<_>>>()?;
    let name = table.name().to_string();
    let to_buckets = |ids: &[u64],
                      b: RecordBatch,
                      rows: Option<UInt32Array>|
     -> Result<Vec<(u64, routing::Part)>> {
        if ids.is_empty() {
            return Err(Error::Protocol(format!("table {name:?} has no buckets")));
        }
        let parts = if key_cols.is_empty() {
            let n = client
                .inner
                .round_robin
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            vec![routing::Part {
                index: (n % ids.len() as u64) as usize,
                batch: b,
                rows: None,
            }]
        } else {
            routing::split(&b, &key_cols, ids.len())?
        };
        Ok(parts
            .into_iter()
            .map(|mut p| {
                // Map rows of a partition's part back to the whole batch.
                p.rows = compose(&rows, p.rows.take(), p.batch.num_rows());
                (ids[p.index], p)
            })
            .collect())
    };
    let Some(pcol) = table.partition_by().map(str::to_string) else {
        let ids = table.buckets_of(None).unwrap_or_default().to_vec();
        return to_buckets(&ids, batch.clone(), None);
    };
    let col = index_of(&pcol)?;
    let arr = batch.column(col);
    let mut order: Vec<String> = Vec::new();
    let mut of = Vec::with_capacity(batch.num_rows());
    let mut index: std::collections::HashMap<String, usize> = Default::default();
    for i in 0..batch.num_rows() {
        let v = routing::partition_value(arr.as_ref(), i)?;
        let n = order.len();
        let k = *index.entry(v.clone()).or_insert(n);
        if k == n {
            order.push(v);
        }
        of.push(k);
    }
    let groups = routing::group(batch, &of, order.len())?;
    let mut out = Vec::new();
    for g in groups {
        let value = &order[g.index];
        if table.buckets_of(Some(value)).is_none() {
            *table = client.create_partition(table.name(), value).await?;
        }
        let ids = table
            .buckets_of(Some(value))
            .ok_or_else(|| Error::Protocol(format!("partition {value:?} was not created")))?
            .to_vec();
        out.extend(to_buckets(&ids, g.batch, g.rows)?);
    }
    Ok(out)
}

/// The original row indices of rows `inner` of a part whose rows were
/// `outer` of the batch.
fn compose(
    outer: &Option<UInt32Array>,
    inner: Option<UInt32Array>,
    n: usize,
) -> Option<UInt32Array> {
    match (outer, inner) {
        (None, inner) => inner,
        (Some(o), None) => {
            debug_assert_eq!(o.len(), n);
            Some(o.clone())
        }
        (Some(o), Some(i)) => Some(i.values().iter().map(|&j| o.value(j as usize)).collect()),
    }
}

struct BucketResult {
    acknowledged: u64,
    failed: Option<(Error, Outcome, Vec<Pending>)>,
}

/// Writes `batches` to one bucket at its leader, following redirects and
/// retrying while nothing unacknowledged can have been stored.
async fn send_bucket(
    client: &Client,
    table: &str,
    bucket: u64,
    mut batches: Vec<Pending>,
) -> BucketResult {
    let mut acknowledged = 0u64;
    let mut r = client.retrier(table, bucket);
    loop {
        let (_, conn) = match r.leader().await {
            Ok(l) => l,
            Err(e) => {
                return BucketResult {
                    acknowledged,
                    failed: Some((e, Outcome::NotWritten, batches)),
                }
            }
        };
        let (acks, result) = put(conn, table, bucket, &batches).await;
        let acked: Vec<Pending> = batches.drain(..acks.min(batches.len())).collect();
        acknowledged += acked.iter().map(|p| p.batch.num_rows() as u64).sum::<u64>();
        match result {
            Ok(()) if batches.is_empty() => {
                return BucketResult {
                    acknowledged,
                    failed: None,
                }
            }
            Ok(()) => {
                let e = Error::Protocol(format!(
                    "bucket {bucket}: the server ended the write with {} batches not acknowledged",
                    batches.len()
                ));
                return BucketResult {
                    acknowledged,
                    failed: Some((e, Outcome::Unknown, batches)),
                };
            }
            Err(PutError::Unknown(e)) => {
                return BucketResult {
                    acknowledged,
                    failed: Some((e, Outcome::Unknown, batches)),
                }
            }
            Err(PutError::Failed(f)) => {
                if let Err(e) = r.failed(f).await {
                    let outcome = match e.root() {
                        Error::OutcomeUnknown(_) => Outcome::Unknown,
                        _ => Outcome::NotWritten,
                    };
                    return BucketResult {
                        acknowledged,
                        failed: Some((e, outcome, batches)),
                    };
                }
            }
        }
    }
}

enum PutError {
    /// Nothing unacknowledged was stored, or the status says what to do.
    Failed(Failure),
    /// The unacknowledged batches may have been stored.
    Unknown(Error),
}

/// One bucket-addressed DoPut of `batches`: the number of batches
/// acknowledged, and how the call ended.
async fn put(
    mut conn: Conn,
    table: &str,
    bucket: u64,
    batches: &[Pending],
) -> (usize, Result<(), PutError>) {
    let mut acks = 0;
    if batches.is_empty() {
        return (0, Ok(()));
    }
    // Encode every batch as one message (they are sliced to size), so that
    // acknowledgements count batches.
    let input = futures::stream::iter(
        batches
            .iter()
            .map(|p| Ok(p.batch.clone()))
            .collect::<Vec<_>>(),
    );
    let data: Vec<FlightData> = match FlightDataEncoderBuilder::new()
        .with_max_flight_data_size(usize::MAX)
        .with_flight_descriptor(Some(wire::bucket_descriptor(table, bucket)))
        .build(input)
        .try_collect()
        .await
    {
        Ok(d) => d,
        Err(e) => {
            return (
                0,
                Err(PutError::Failed(Failure::Fatal(Error::Arrow(
                    flight_to_arrow(e),
                )))),
            )
        }
    };
    // The server has seen nothing of the call until gRPC pulls the first
    // message from the request stream (it does so once the connection is
    // up and the request's headers are written).
    let sent = Arc::new(AtomicBool::new(false));
    let flag = sent.clone();
    let body = futures::stream::iter(data).inspect(move |_| flag.store(true, Ordering::Release));
    let unknown_or_retry = |st: StatusError, sent: bool| -> PutError {
        match st.class() {
            // Unauthenticated: the node refused the token before reading a
            // batch; the retrier handshakes again.
            Class::Redirect { .. } | Class::BucketUnavailable | Class::Unauthenticated => {
                PutError::Failed(Failure::Retry(st))
            }
            Class::Unreachable if !sent => PutError::Failed(Failure::Retry(st)),
            Class::Unreachable | Class::OutcomeUnknown => {
                PutError::Unknown(Error::OutcomeUnknown(st.to_string()))
            }
            Class::Final => match st.code {
                tonic::Code::Cancelled | tonic::Code::DeadlineExceeded | tonic::Code::Unknown
                    if sent =>
                {
                    PutError::Unknown(Error::OutcomeUnknown(st.to_string()))
                }
                // A TLS failure once batches went out broke an established
                // connection (a handshake fails before any is sent).
                _ if sent && st.tls.is_some() => {
                    PutError::Unknown(Error::OutcomeUnknown(st.to_string()))
                }
                // Any status but OUTCOME_UNKNOWN means none of the
                // unacknowledged batches was appended.
                _ => PutError::Failed(Failure::Fatal(st.into_error(table))),
            },
        }
    };
    let mut stream = match conn.do_put(body).await {
        Ok(resp) => resp.into_inner(),
        Err(st) => {
            let st = StatusError::from_status(&st);
            return (0, Err(unknown_or_retry(st, sent.load(Ordering::Acquire))));
        }
    };
    loop {
        match stream.message().await {
            Ok(Some(res)) => {
                let ack = serde_json::from_slice::<wire::PutAck>(&res.app_metadata);
                match (ack, batches.get(acks)) {
                    (Ok(ack), Some(p)) if ack.rows == p.batch.num_rows() as i64 => acks += 1,
                    (ack, _) => {
                        let e = Error::Protocol(format!(
                            "bucket {bucket}: unexpected acknowledgement {ack:?} of batch {acks}"
                        ));
                        return (acks, Err(PutError::Unknown(e)));
                    }
                }
            }
            Ok(None) => return (acks, Ok(())),
            Err(st) => {
                let st = StatusError::from_status(&st);
                return (acks, Err(unknown_or_retry(st, true)));
            }
        }
    }
}

pub(crate) fn flight_to_arrow(e: arrow_flight::error::FlightError) -> arrow_schema::ArrowError {
    match e {
        arrow_flight::error::FlightError::Arrow(a) => a,
        other => arrow_schema::ArrowError::ExternalError(Box::new(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testserver::{self, Node, Put};
    use crate::Config;
    use arrow_array::{ArrayRef, Int64Array};
    use std::sync::Mutex;
    use std::time::Duration;

    fn ids(n: i64) -> RecordBatch {
        let a: ArrayRef = Arc::new(Int64Array::from_iter_values(0..n));
        RecordBatch::try_from_iter([("id", a)]).unwrap()
    }

    async fn node() -> (Arc<Mutex<Node>>, String) {
        let n = Arc::new(Mutex::new(Node::default()));
        let addr = testserver::start(n.clone()).await.to_string();
        (n, addr)
    }

    async fn client(seed: &str, timeout_ms: u64) -> Client {
        let config = Config {
            retry_timeout: Duration::from_millis(timeout_ms),
            ..Default::default()
        };
        Client::connect([seed], config).await.unwrap()
    }

    /// With credentials the client logs in once per node, sends the token
    /// with every call, and after the node refuses an expired token logs in
    /// again and repeats the call: a describe and a write, each stored once.
    /// Wrong credentials fail with `Error::Unauthenticated`.
    #[tokio::test]
    async fn logs_in_and_again_after_the_token_expired() {
        let (a, a_addr) = node().await;
        {
            let mut n = a.lock().unwrap();
            n.auth = Some(("alice".into(), "pw".into()));
            n.describes.push_back(testserver::describe(&a_addr));
        }
        let with = |user: &str, password: &str| Config {
            retry_timeout: Duration::from_secs(5),
            credentials: Some(crate::Credentials::new(user, password)),
            ..Default::default()
        };
        match Client::connect([a_addr.as_str()], with("alice", "wrong")).await {
            Err(Error::Unauthenticated(_)) => {}
            r => panic!("wrong password: {r:?}"),
        }
        match Client::connect([a_addr.as_str()], Config::default()).await {
            Err(Error::Unauthenticated(_)) => {}
            r => panic!("no credentials: {r:?}"),
        }
        a.lock().unwrap().handshakes = 0;
        let c = Client::connect([a_addr.as_str()], with("alice", "pw"))
            .await
            .unwrap();
        let mut w = c.append_writer("t").await.unwrap();
        w.append(ids(10)).await.unwrap();
        assert_eq!(w.flush().await.unwrap().rows, 10);
        assert_eq!(a.lock().unwrap().handshakes, 1, "one login per node");
        // Every token expires: the next write and describe log in again.
        a.lock().unwrap().valid_tokens.clear();
        w.append(ids(5)).await.unwrap();
        assert_eq!(w.flush().await.unwrap().rows, 5);
        a.lock().unwrap().valid_tokens.clear();
        c.table("t").await.unwrap();
        let n = a.lock().unwrap();
        assert_eq!(n.acked_rows, vec![10, 5], "every row exactly once");
        assert_eq!(n.handshakes, 3);
    }

    #[tokio::test]
    async fn redirect_then_unavailable_then_written_once() {
        let (a, a_addr) = node().await;
        let (b, b_addr) = node().await;
        a.lock()
            .unwrap()
            .describes
            .push_back(testserver::describe(&a_addr));
        a.lock()
            .unwrap()
            .puts
            .push_back(Put::NotLeader(b_addr.clone()));
        b.lock()
            .unwrap()
            .puts
            .extend([Put::Unavailable, Put::Unavailable]);
        let c = client(&a_addr, 5_000).await;
        let mut w = c.append_writer("t").await.unwrap();
        w.append(ids(10)).await.unwrap();
        w.append(ids(5)).await.unwrap();
        assert_eq!(w.flush().await.unwrap().rows, 15);
        assert_eq!(a.lock().unwrap().received_batches, 0);
        assert_eq!(
            b.lock().unwrap().acked_rows,
            vec![10, 5],
            "every row exactly once"
        );
        assert_eq!(b.lock().unwrap().do_puts, 3);
        assert_eq!(
            c.view().leader(1),
            Some(b_addr.as_str()),
            "the redirect updated the cache"
        );
    }

    #[tokio::test]
    async fn dead_leader_is_dropped_and_the_table_described_again() {
        let (a, a_addr) = node().await;
        let (b, b_addr) = node().await;
        let dead = testserver::dead_addr().to_string();
        a.lock()
            .unwrap()
            .describes
            .extend([testserver::describe(&dead), testserver::describe(&b_addr)]);
        let c = client(&a_addr, 10_000).await;
        let mut w = c.append_writer("t").await.unwrap();
        assert_eq!(c.view().leader(1), Some(dead.as_str()));
        w.append(ids(7)).await.unwrap();
        assert_eq!(w.flush().await.unwrap().rows, 7);
        assert_eq!(b.lock().unwrap().acked_rows, vec![7]);
        assert_eq!(c.view().leader(1), Some(b_addr.as_str()));
    }

    #[tokio::test]
    async fn unknown_outcome_is_reported_and_not_resent() {
        let (b, b_addr) = node().await;
        b.lock()
            .unwrap()
            .describes
            .push_back(testserver::describe(&b_addr));
        b.lock().unwrap().puts.push_back(Put::AckThenUnknown(1));
        let c = client(&b_addr, 5_000).await;
        let mut w = c.append_writer("t").await.unwrap();
        for n in [10, 20, 30] {
            w.append(ids(n)).await.unwrap();
        }
        let Err(Error::Write(e)) = w.flush().await else {
            panic!("want a write error")
        };
        assert_eq!(e.acknowledged, 10);
        assert_eq!(e.unacknowledged_rows(), 50);
        let seqs: Vec<u64> = e.unacknowledged.iter().map(|u| u.batch).collect();
        assert_eq!(seqs, vec![1, 2]);
        assert!(e
            .unacknowledged
            .iter()
            .all(|u| u.outcome == Outcome::Unknown));
        assert_eq!(e.unacknowledged[0].rows, (0..20).collect::<Vec<u32>>());
        assert_eq!(
            b.lock().unwrap().do_puts,
            1,
            "an unknown outcome is never resent"
        );
        assert_eq!(b.lock().unwrap().acked_rows, vec![10]);
    }

    #[tokio::test]
    async fn rows_that_do_not_fit_are_not_written_nor_retried() {
        let (b, b_addr) = node().await;
        b.lock()
            .unwrap()
            .describes
            .push_back(testserver::describe(&b_addr));
        b.lock().unwrap().puts.push_back(Put::Invalid("23502"));
        let c = client(&b_addr, 5_000).await;
        let mut w = c.append_writer("t").await.unwrap();
        w.append(ids(3)).await.unwrap();
        let Err(Error::Write(e)) = w.flush().await else {
            panic!("want a write error")
        };
        assert_eq!(e.acknowledged, 0);
        assert_eq!(e.unacknowledged[0].outcome, Outcome::NotWritten);
        match &e.causes[0].1 {
            Error::Schema { sqlstate, .. } => assert_eq!(sqlstate.as_deref(), Some("23502")),
            other => panic!("cause {other:?}"),
        }
        assert_eq!(b.lock().unwrap().do_puts, 1);
    }

    #[tokio::test]
    async fn unavailable_is_retried_until_the_deadline() {
        let (b, b_addr) = node().await;
        b.lock()
            .unwrap()
            .describes
            .push_back(testserver::describe(&b_addr));
        b.lock()
            .unwrap()
            .puts
            .extend(std::iter::repeat_n(Put::Unavailable, 1000));
        let c = client(&b_addr, 300).await;
        let mut w = c.append_writer("t").await.unwrap();
        w.append(ids(3)).await.unwrap();
        let start = std::time::Instant::now();
        let Err(Error::Write(e)) = w.flush().await else {
            panic!("want a write error")
        };
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(e.unacknowledged[0].outcome, Outcome::NotWritten);
        assert!(
            matches!(e.causes[0].1, Error::RetriesExhausted { .. }),
            "{:?}",
            e.causes[0].1
        );
        assert!(matches!(e.causes[0].1.root(), Error::Unavailable { .. }));
        assert!(b.lock().unwrap().do_puts > 2, "retried");
        assert!(b.lock().unwrap().acked_rows.is_empty());
    }

    #[test]
    fn slices_keep_original_rows() {
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..1000));
        let b = RecordBatch::try_from_iter([("id", ids)]).unwrap();
        let rows = UInt32Array::from_iter_values((0..1000).map(|i| i * 2));
        let pieces = slice(b.clone(), Some(rows), 1000);
        assert!(pieces.len() > 1);
        let mut all = Vec::new();
        for (p, r) in &pieces {
            let r = r.as_ref().unwrap();
            assert_eq!(p.num_rows(), r.len());
            all.extend(r.values().iter().copied());
        }
        assert_eq!(all, (0..1000).map(|i| i * 2).collect::<Vec<u32>>());
        let whole = slice(b, None, usize::MAX);
        assert_eq!(whole.len(), 1);
        assert!(whole[0].1.is_none());
    }

    #[test]
    fn compose_maps_back_to_the_batch() {
        let outer = Some(UInt32Array::from(vec![3, 5, 9]));
        let inner = Some(UInt32Array::from(vec![0, 2]));
        assert_eq!(
            compose(&outer, inner, 2).unwrap().values().to_vec(),
            vec![3, 9]
        );
        assert_eq!(
            compose(&outer, None, 3).unwrap().values().to_vec(),
            vec![3, 5, 9]
        );
        assert!(compose(&None, None, 3).is_none());
    }
}
