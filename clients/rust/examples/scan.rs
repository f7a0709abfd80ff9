//! Scans a table and prints `rows N` last: a log table's rows, a
//! primary-key table's current state, or with `--changelog` its changelog;
//! `--bucket B` reads one bucket. `--sum-id` also prints the sum of the
//! `id` column and `--count-distinct-id` the number of distinct ids.
//!
//! ```text
//! cargo run --release --example scan -- --server HOST:PORT --table T [--changelog] [--bucket B]
//! ```

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use arrow_array::cast::AsArray;
use arrow_array::types::{Int16Type, Int32Type, Int64Type};
use arrow_schema::DataType;
use futures::TryStreamExt;
use mink_client::{Client, Config, Error, ScanOptions};

const USAGE: &str = "scan --server HOST:PORT --table T [--changelog] [--bucket B] [--columns a,b] [--distinct-ids] [--timeout-secs 30]";

#[tokio::main]
async fn main() {
    let flags = common::Flags::parse(USAGE);
    let server = flags.required("server", USAGE);
    let table = flags.required("table", USAGE);
    let opts = ScanOptions {
        changelog: flags.has("changelog"),
        bucket: flags.get("bucket").map(|b| {
            b.parse()
                .unwrap_or_else(|_| common::fail(USAGE, "bad --bucket"))
        }),
        columns: flags
            .get("columns")
            .map(|c| c.split(',').map(str::to_string).collect()),
        ..Default::default()
    };
    let timeout = Duration::from_secs(flags.number("timeout-secs", 30, USAGE));
    let start = Instant::now();
    match run(&server, &table, opts, flags.has("distinct-ids"), timeout).await {
        Ok(rows) => {
            eprintln!("{rows} rows in {:.3}s", start.elapsed().as_secs_f64());
            println!("rows {rows}");
        }
        Err(e) => {
            eprintln!("scan: {e}");
            std::process::exit(1);
        }
    }
}

async fn run(
    server: &str,
    table: &str,
    opts: ScanOptions,
    distinct: bool,
    timeout: Duration,
) -> Result<u64, Error> {
    let config = Config {
        retry_timeout: timeout,
        credentials: common::credentials(),
        tls: common::tls(),
        ..Default::default()
    };
    let client = Client::connect([server], config).await?;
    let mut scan = client.scan(table, opts).await?;
    let mut rows = 0u64;
    let mut ids = HashSet::new();
    while let Some(batch) = scan.try_next().await? {
        rows += batch.num_rows() as u64;
        if distinct {
            let Ok(c) = batch.schema().index_of("id") else {
                return Err(Error::InvalidArgument("no id column".into()));
            };
            let col = batch.column(c);
            for i in 0..col.len() {
                let v = match col.data_type() {
                    DataType::Int16 => col.as_primitive::<Int16Type>().value(i) as i64,
                    DataType::Int32 => col.as_primitive::<Int32Type>().value(i) as i64,
                    _ => col.as_primitive::<Int64Type>().value(i),
                };
                ids.insert(v);
            }
        }
    }
    if distinct {
        println!("distinct ids {}", ids.len());
    }
    Ok(rows)
}
