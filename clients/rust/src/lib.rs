//! `mink-client`: the Rust client of [mink](https://github.com/minkdb/mink)
//! over Arrow Flight.
//!
//! A [`Client`] routes rows to buckets with the server's hash
//! ([`routing`]) and sends each bucket's rows straight to the bucket's
//! leader. It caches the leader of every bucket in an immutable
//! [`ClusterView`] snapshot that is replaced whole on every change; on
//! `NotLeader` with a redirect it updates that one entry and retries there,
//! on `Unavailable` it backs off and retries, and when a node cannot be
//! reached it drops that node's entries and describes the table again from
//! any node — all within the call's deadline ([`Config::retry_timeout`],
//! [`Client::with_retry_timeout`]).
//!
//! - [`Client::append_writer`] / [`Client::upsert_writer`]: [`Writer`]s for
//!   log and primary-key tables; [`Writer::flush`] returns once every row
//!   is acknowledged, or a [`WriteError`] saying which rows are not.
//! - [`Client::lookup`] and [`Client::delete`] by primary key.
//! - [`Client::scan`]: a table, a bucket, a primary-key table's state or
//!   changelog, as a stream of `RecordBatch`es.
//! - [`Config::credentials`]: logs in to a cluster that requires
//!   credentials with Flight's basic-auth handshake, once per node, and
//!   sends the bearer token with every call ([`Credentials`]).
//! - [`Config::tls`]: TLS towards every node ([`TlsConfig`]: the CA, a
//!   client certificate, the name to verify); `grpc+tls://` seeds select
//!   TLS with the system's roots.
//!
//! ```no_run
//! use std::sync::Arc;
//! use arrow_array::{Int64Array, RecordBatch, StringArray};
//! use futures::TryStreamExt;
//! use mink_client::{Client, Config};
//!
//! # async fn f() -> mink_client::Result<()> {
//! let client = Client::connect(["127.0.0.1:8815"], Config::default()).await?;
//! let batch = RecordBatch::try_from_iter([
//!     ("id", Arc::new(Int64Array::from(vec![1, 2])) as _),
//!     ("url", Arc::new(StringArray::from(vec!["/a", "/b"])) as _),
//! ])?;
//! let mut w = client.append_writer("clicks").await?;
//! w.append(batch).await?;
//! w.flush().await?;
//! let batches: Vec<RecordBatch> = client.scan("clicks", Default::default()).await?.try_collect().await?;
//! # Ok(()) }
//! ```
//!
//! Every type is `Send + Sync`; calls may run from many tasks at once.
//! Scans spawn one tokio task per bucket read, which end when the stream is
//! drained or dropped.
#![warn(missing_docs)]

mod client;
mod cluster;
mod error;
mod kv;
pub mod routing;
mod scan;
pub mod schema;
mod table;
#[cfg(test)]
mod testserver;
mod tls;
mod wire;
mod writer;

pub use client::{Client, Config, Credentials};
pub use cluster::ClusterView;
pub use error::{Error, Result};
pub use scan::{ScanOptions, ScanStream};
pub use table::{Column, Table};
pub use tls::{TlsConfig, TlsIdentity};
pub use wire::parse_location;
pub use writer::{Flushed, Outcome, UnackedRows, WriteError, Writer};
