//! Scans: a table's, a bucket's, or a primary-key table's state or
//! changelog, read from each bucket's leader as a stream of batches.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use arrow_array::RecordBatch;
use arrow_flight::decode::{DecodedPayload, FlightDataDecoder};
use arrow_flight::error::FlightError;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use futures::{Stream, StreamExt, TryStreamExt};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;

use crate::client::{Client, Failure};
use crate::error::{Class, Error, Result, StatusError};
use crate::wire::{self, Ticket};

/// What a scan reads. `ScanOptions::default()` reads every row and column.
#[derive(Debug, Clone, Default)]
pub struct ScanOptions {
    /// Project to these columns, in this order; `None`: all.
    pub columns: Option<Vec<String>>,
    /// Only these partitions of a partitioned table (canonical text);
    /// `None`: all.
    pub partitions: Option<Vec<String>>,
    /// Only this bucket (an id of [`crate::Table::bucket_ids`]).
    pub bucket: Option<u64>,
    /// Read a primary-key table's changelog instead of its current state:
    /// `_change_type` (`+I`, `-U`, `+U`, `-D`) and the table's columns, each
    /// bucket up to its acknowledged end when its read starts. `columns`
    /// then name changelog columns.
    pub changelog: bool,
}

/// The batches of a scan. Batches of different buckets interleave; within
/// a bucket they come in offset order (for a primary-key table's state,
/// key order). Dropping the stream stops the reads.
pub struct ScanStream {
    schema: SchemaRef,
    rx: mpsc::Receiver<Result<RecordBatch>>,
    _tasks: JoinSet<()>,
}

impl ScanStream {
    /// The schema of the batches.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

impl Stream for ScanStream {
    type Item = Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

impl Client {
    /// Scans a table: every bucket's rows up to the end each had when the
    /// scan started (for a log table), or the current state (for a
    /// primary-key table), read from all buckets in parallel
    /// ([`crate::Config::scan_parallelism`] at a time).
    ///
    /// A bucket whose leader moves during a log or changelog read resumes
    /// at the new leader after the rows already returned. A primary-key
    /// state read cannot resume part way: if its bucket moves after some of
    /// its rows were returned the stream yields an error; before that it is
    /// retried at the new leader.
    ///
    /// ```no_run
    /// # async fn f(client: mink_client::Client) -> mink_client::Result<()> {
    /// use futures::TryStreamExt;
    /// let mut rows = 0;
    /// let mut scan = client.scan("clicks", Default::default()).await?;
    /// while let Some(batch) = scan.try_next().await? {
    ///     rows += batch.num_rows();
    /// }
    /// println!("rows {rows}");
    /// # Ok(()) }
    /// ```
    pub async fn scan(&self, table: &str, opts: ScanOptions) -> Result<ScanStream> {
        let t = self.describe(table).await?;
        let pk = t.is_primary_key_table();
        if opts.changelog && !pk {
            return Err(Error::WrongKind(format!(
                "table {table:?} has no primary key, so no changelog"
            )));
        }
        let full = if opts.changelog {
            let mut fields = vec![Arc::new(Field::new("_change_type", DataType::Utf8, false))];
            fields.extend(t.schema().fields().iter().cloned());
            Arc::new(Schema::new(fields))
        } else {
            t.schema()
        };
        let schema = match &opts.columns {
            None => full,
            Some(cols) => {
                let idx = cols
                    .iter()
                    .map(|c| {
                        full.index_of(c).map_err(|_| Error::Schema {
                            message: format!("table {table:?} has no column {c:?}"),
                            sqlstate: Some("42703".into()),
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                Arc::new(full.project(&idx)?)
            }
        };
        let tickets: Vec<Ticket> = if opts.changelog || opts.bucket.is_some() {
            let ids: Vec<u64> = match (opts.bucket, &opts.partitions) {
                (Some(b), _) => {
                    if !t.bucket_ids().contains(&b) {
                        return Err(Error::InvalidArgument(format!(
                            "table {table:?} has no bucket {b}"
                        )));
                    }
                    vec![b]
                }
                (None, None) => t.bucket_ids(),
                (None, Some(ps)) => {
                    if t.partition_by().is_none() {
                        return Err(Error::InvalidArgument(format!(
                            "table {table:?} is not partitioned"
                        )));
                    }
                    t.partitions()
                        .iter()
                        .filter(|(v, _)| ps.contains(v))
                        .flat_map(|(_, b)| b.iter().copied())
                        .collect()
                }
            };
            ids.into_iter()
                .map(|b| Ticket {
                    columns: opts.columns.clone(),
                    changelog: opts.changelog,
                    ..Ticket::new(b)
                })
                .collect()
        } else {
            self.flight_info_tickets(table, &opts).await?
        };
        let (tx, rx) = mpsc::channel(self.config().scan_parallelism.max(1) * 2);
        let sem = Arc::new(Semaphore::new(self.config().scan_parallelism.max(1)));
        let mut tasks = JoinSet::new();
        // A state read of a primary-key table cannot resume part way.
        let resumable = !pk || opts.changelog;
        for ticket in tickets {
            let client = self.clone();
            let table = table.to_string();
            let tx = tx.clone();
            let sem = sem.clone();
            tasks.spawn(async move {
                let Ok(_permit) = sem.acquire().await else {
                    return;
                };
                if let Err(e) = read_bucket(&client, &table, ticket, resumable, &tx).await {
                    let _ = tx.send(Err(e)).await;
                }
            });
        }
        Ok(ScanStream {
            schema,
            rx,
            _tasks: tasks,
        })
    }

    /// The tickets of GetFlightInfo: one per bucket, each up to the end
    /// its leader had when asked.
    async fn flight_info_tickets(&self, table: &str, opts: &ScanOptions) -> Result<Vec<Ticket>> {
        let desc = wire::Command {
            table,
            partitions: opts.partitions.as_deref(),
            columns: opts.columns.as_deref(),
        }
        .descriptor();
        let mut backoff = crate::client::Backoff::new(self.retry_timeout);
        loop {
            let mut last = None;
            for addr in self.view().nodes.clone() {
                let mut conn = match self.ready_conn(&addr).await {
                    Ok(c) => c,
                    Err(st) if matches!(st.class(), Class::Unreachable) => {
                        last = Some(st.into_error(table));
                        continue;
                    }
                    Err(st) => return Err(st.into_error(table)),
                };
                let mut result = conn.get_flight_info(desc.clone()).await;
                if let Err(st) = &result {
                    let st = StatusError::from_status(st);
                    if self.may_reauthenticate(&st) {
                        // An expired token: handshake again, once.
                        self.forget_token(&addr);
                        conn = self
                            .ready_conn(&addr)
                            .await
                            .map_err(|st| st.into_error(table))?;
                        result = conn.get_flight_info(desc.clone()).await;
                    }
                }
                match result {
                    Ok(info) => {
                        let info = info.into_inner();
                        let mut out = Vec::new();
                        for ep in info.endpoint {
                            let raw = ep.ticket.map(|t| t.ticket).unwrap_or_default();
                            let t = Ticket::parse(&raw).map_err(Error::Protocol)?;
                            if let Some(loc) = ep.location.first() {
                                if let Ok(addr) = wire::parse_location(&loc.uri) {
                                    let b = t.bucket;
                                    self.update(|v| v.with_redirect(b, &addr));
                                }
                            }
                            out.push(t);
                        }
                        return Ok(out);
                    }
                    Err(st) => {
                        let st = StatusError::from_status(&st);
                        if matches!(st.class(), Class::Unreachable | Class::BucketUnavailable) {
                            last = Some(st.into_error(table));
                        } else {
                            return Err(st.into_error(table));
                        }
                    }
                }
            }
            backoff
                .wait(last.unwrap_or(Error::Unavailable {
                    bucket: None,
                    message: "no node to ask".into(),
                }))
                .await?;
        }
    }
}

/// Reads one ticket's rows into `tx`, following redirects and resuming
/// after the rows sent when the bucket moves.
async fn read_bucket(
    client: &Client,
    table: &str,
    mut ticket: Ticket,
    resumable: bool,
    tx: &mpsc::Sender<Result<RecordBatch>>,
) -> Result<()> {
    let mut r = client.retrier(table, ticket.bucket);
    let mut sent = false;
    loop {
        let (addr, mut conn) = r.leader().await?;
        let attempt = async {
            let resp = conn
                .do_get(arrow_flight::Ticket::new(ticket.encode()))
                .await
                .map_err(|st| ReadError::Status(StatusError::from_status(&st)))?;
            let mut dec = FlightDataDecoder::new(resp.into_inner().map_err(FlightError::from));
            while let Some(msg) = dec.next().await {
                let msg = match msg {
                    Ok(m) => m,
                    Err(FlightError::Tonic(st)) => {
                        return Err(ReadError::Status(StatusError::from_status(&st)))
                    }
                    Err(e) => {
                        return Err(ReadError::Fatal(Error::Protocol(format!("decode: {e}"))))
                    }
                };
                let DecodedPayload::RecordBatch(batch) = msg.payload else {
                    continue;
                };
                let meta: wire::BatchMeta = if msg.inner.app_metadata.is_empty() {
                    wire::BatchMeta::default()
                } else {
                    serde_json::from_slice(&msg.inner.app_metadata).map_err(|e| {
                        ReadError::Fatal(Error::Protocol(format!("batch metadata: {e}")))
                    })?
                };
                let n = batch.num_rows() as u64;
                if tx.send(Ok(batch)).await.is_err() {
                    return Ok(()); // the stream was dropped
                }
                sent = true;
                ticket.from = meta.offset + n;
            }
            Ok(())
        };
        match attempt.await {
            Ok(()) => return Ok(()),
            Err(ReadError::Fatal(e)) => return Err(e),
            Err(ReadError::Status(st)) if sent && !resumable => {
                return Err(Error::Protocol(format!(
                    "read the state of bucket {} of table {table:?} at {addr}: failed after some of its rows were returned (a state read cannot resume): {st}",
                    ticket.bucket
                )))
            }
            // A read changes nothing: any failure to reach the leader,
            // including a connection that broke (which gRPC may report as
            // UNKNOWN or CANCELLED), is retried.
            Err(ReadError::Status(mut st)) => {
                if st.info.is_none() && matches!(st.code, tonic::Code::Unknown | tonic::Code::Cancelled) {
                    st.code = tonic::Code::Unavailable;
                }
                r.failed(Failure::Retry(st)).await?
            }
        }
    }
}

enum ReadError {
    Status(StatusError),
    Fatal(Error),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testserver::{self, Get, Node};
    use crate::Config;
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use std::sync::Mutex;

    #[tokio::test]
    async fn a_moved_bucket_resumes_after_the_rows_returned() {
        let a = Arc::new(Mutex::new(Node::default()));
        let b = Arc::new(Mutex::new(Node::default()));
        let a_addr = testserver::start(a.clone()).await.to_string();
        let b_addr = testserver::start(b.clone()).await.to_string();
        a.lock()
            .unwrap()
            .describes
            .push_back(testserver::describe(&a_addr));
        // A serves offsets 0..20, then the bucket moves to B, which serves
        // the rest.
        a.lock().unwrap().gets.push_back(Get {
            rows: vec![10, 10],
            redirect: Some(b_addr.clone()),
        });
        b.lock().unwrap().gets.push_back(Get {
            rows: vec![5],
            redirect: None,
        });
        let c = Client::connect([a_addr.as_str()], Config::default())
            .await
            .unwrap();
        let opts = ScanOptions {
            bucket: Some(1),
            ..Default::default()
        };
        let batches: Vec<RecordBatch> = c
            .scan("t", opts)
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let ids: Vec<i64> = batches
            .iter()
            .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
            .collect();
        assert_eq!(
            ids,
            (0..25).collect::<Vec<i64>>(),
            "every row once, in offset order"
        );
        let resumed = &b.lock().unwrap().tickets;
        assert_eq!(resumed.len(), 1);
        assert_eq!(
            resumed[0].from, 20,
            "B was asked for the rows after those returned"
        );
        assert_eq!(c.view().leader(1), Some(b_addr.as_str()));
    }

    #[tokio::test]
    async fn errors_end_the_stream_with_an_error() {
        let a = Arc::new(Mutex::new(Node::default()));
        let a_addr = testserver::start(a.clone()).await.to_string();
        a.lock()
            .unwrap()
            .describes
            .push_back(testserver::describe(&a_addr));
        // No DoGet scripted: the node answers NotFound.
        let c = Client::connect([a_addr.as_str()], Config::default())
            .await
            .unwrap();
        let opts = ScanOptions {
            bucket: Some(1),
            ..Default::default()
        };
        let got: Result<Vec<RecordBatch>> = c.scan("t", opts).await.unwrap().try_collect().await;
        assert!(matches!(got, Err(Error::NoSuchTable(_))), "{got:?}");
        let opts = ScanOptions {
            bucket: Some(99),
            ..Default::default()
        };
        assert!(matches!(
            c.scan("t", opts).await,
            Err(Error::InvalidArgument(_))
        ));
        let opts = ScanOptions {
            changelog: true,
            ..Default::default()
        };
        assert!(matches!(c.scan("t", opts).await, Err(Error::WrongKind(_))));
    }
}
