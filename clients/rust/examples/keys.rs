//! Looks up or deletes rows of a primary-key table by `id`: `--lookup` the
//! ids FROM..=TO and print `found N` (and, with `--check`, fail unless
//! every found row has the values `load` generates for its id), or
//! `--delete` them and print `deleted N`.
//!
//! ```text
//! cargo run --release --example keys -- --server HOST:PORT --table T --lookup|--delete --from 1 --to N [--check]
//! ```

mod common;

use std::time::Duration;

use arrow_array::cast::AsArray;
use mink_client::{Client, Config, Error};

const USAGE: &str = "keys --server HOST:PORT --table T (--lookup | --delete) --from A --to B [--check] [--timeout-secs 30]";

#[tokio::main]
async fn main() {
    let flags = common::Flags::parse(USAGE);
    let server = flags.required("server", USAGE);
    let table = flags.required("table", USAGE);
    let from = flags.number("from", 1, USAGE) as i64;
    let to = flags.number("to", 0, USAGE) as i64;
    let timeout = Duration::from_secs(flags.number("timeout-secs", 30, USAGE));
    let r = run(&server, &table, from, to, &flags, timeout).await;
    if let Err(e) = r {
        eprintln!("keys: {e}");
        std::process::exit(1);
    }
}

async fn run(
    server: &str,
    table: &str,
    from: i64,
    to: i64,
    flags: &common::Flags,
    timeout: Duration,
) -> Result<(), Error> {
    let config = Config {
        retry_timeout: timeout,
        credentials: common::credentials(),
        tls: common::tls(),
        ..Default::default()
    };
    let client = Client::connect([server], config).await?;
    let t = client.table(table).await?;
    let ids: Vec<i64> = (from..=to).collect();
    // The generated row of every id: its key columns are the keys.
    let rows = common::generate(&t.schema(), &ids, t.partition_by())?;
    let key_idx = t
        .primary_key()
        .iter()
        .map(|k| rows.schema().index_of(k))
        .collect::<Result<Vec<_>, _>>()?;
    let keys = rows.project(&key_idx)?;
    if flags.has("delete") {
        let n = client.delete(table, &keys).await?;
        println!("deleted {n}");
        return Ok(());
    }
    if !flags.has("lookup") {
        common::fail(USAGE, "want --lookup or --delete");
    }
    let mut found = 0;
    for chunk in 0..keys.num_rows().div_ceil(10_000) {
        let off = chunk * 10_000;
        let len = 10_000.min(keys.num_rows() - off);
        let got = client.lookup(table, &keys.slice(off, len)).await?;
        found += got.num_rows();
        if flags.has("check") {
            // Every found row must be the row load generated for its id.
            let id_col = got.schema().index_of("id")?;
            let got_ids: Vec<i64> = (0..got.num_rows())
                .map(|i| match got.column(id_col).data_type() {
                    arrow_schema::DataType::Int32 => got
                        .column(id_col)
                        .as_primitive::<arrow_array::types::Int32Type>()
                        .value(i) as i64,
                    _ => got
                        .column(id_col)
                        .as_primitive::<arrow_array::types::Int64Type>()
                        .value(i),
                })
                .collect();
            let want = common::generate(&t.schema(), &got_ids, t.partition_by())?;
            if want != got {
                return Err(Error::InvalidArgument(format!(
                    "looked-up rows differ from the generated ones (ids {from}..={to})"
                )));
            }
        }
    }
    println!("found {found}");
    Ok(())
}
