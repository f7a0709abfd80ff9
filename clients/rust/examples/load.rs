//! Writes rows with `id` = 1..N to a table through the append writer (log
//! tables) or the upsert writer (`--upsert`, primary-key tables); the other
//! columns get generated values of their types, read from the table's
//! schema. Prints `acknowledged N` when done: the rows acknowledged, also
//! when it stops early on an error (then it exits 1).
//!
//! ```text
//! cargo run --release --example load -- --server HOST:PORT --table T --rows N [--upsert]
//!     [--from 1] [--batch-rows 65536] [--flush-rows 1048576] [--writers 4] [--timeout-secs 30]
//! ```

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mink_client::{Client, Config, Error};

const USAGE: &str = "load --server HOST:PORT --table T --rows N [--upsert] [--from 1] [--batch-rows 65536] [--flush-rows 1048576] [--writers 4] [--timeout-secs 30]";

#[tokio::main]
async fn main() {
    let flags = common::Flags::parse(USAGE);
    let server = flags.required("server", USAGE);
    let table = flags.required("table", USAGE);
    let rows = flags.number("rows", 0, USAGE);
    let from = flags.number("from", 1, USAGE);
    let batch_rows = flags.number("batch-rows", 65_536, USAGE).max(1);
    let flush_rows = flags.number("flush-rows", 1 << 20, USAGE).max(batch_rows);
    let writers = flags.number("writers", 4, USAGE).max(1);
    let timeout = Duration::from_secs(flags.number("timeout-secs", 30, USAGE));
    let upsert = flags.has("upsert");

    let acked = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let result = run(
        &server, &table, from, rows, batch_rows, flush_rows, writers, timeout, upsert, &acked,
    )
    .await;
    let n = acked.load(Ordering::Relaxed);
    eprintln!("{n} rows in {:.3}s", start.elapsed().as_secs_f64());
    println!("acknowledged {n}");
    if let Err(e) = result {
        eprintln!("load: {e}");
        std::process::exit(1);
    }
}

#[allow(clippy::too_many_arguments)]
async fn run(
    server: &str,
    table: &str,
    from: u64,
    rows: u64,
    batch_rows: u64,
    flush_rows: u64,
    writers: u64,
    timeout: Duration,
    upsert: bool,
    acked: &Arc<AtomicU64>,
) -> Result<(), Error> {
    let config = Config {
        retry_timeout: timeout,
        credentials: common::credentials(),
        tls: common::tls(),
        ..Default::default()
    };
    let client = Client::connect([server], config).await?;
    let t = client.table(table).await?;
    // Each writer takes whole batches in turn: writer w writes batches w,
    // w + writers, …
    let batches = rows.div_ceil(batch_rows);
    let mut tasks = Vec::new();
    for w in 0..writers.min(batches.max(1)) {
        let client = client.clone();
        let t = t.clone();
        let table = table.to_string();
        let acked = acked.clone();
        tasks.push(tokio::spawn(async move {
            let mut writer = if upsert {
                client.upsert_writer(&table).await?
            } else {
                client.append_writer(&table).await?
            };
            let schema = t.schema();
            let mut b = w;
            while b < batches {
                let lo = from + b * batch_rows;
                let hi = (lo + batch_rows).min(from + rows);
                let ids: Vec<i64> = (lo as i64..hi as i64).collect();
                let batch = common::generate(&schema, &ids, t.partition_by())?;
                writer.append(batch).await?;
                b += writers;
                if writer.pending_rows() as u64 >= flush_rows || b >= batches {
                    match writer.flush().await {
                        Ok(done) => {
                            acked.fetch_add(done.rows, Ordering::Relaxed);
                        }
                        Err(Error::Write(e)) => {
                            acked.fetch_add(e.acknowledged, Ordering::Relaxed);
                            return Err(Error::Write(e));
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
            Ok::<(), Error>(())
        }));
    }
    let mut first = None;
    for task in tasks {
        let r = task
            .await
            .unwrap_or_else(|e| Err(Error::InvalidArgument(format!("writer task: {e}"))));
        if let Err(e) = r {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}
