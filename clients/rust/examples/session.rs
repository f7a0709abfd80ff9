//! A long-lived client that reads commands from stdin and answers each with
//! one line on stdout, so that a test can keep one client — and its cached
//! leaders — alive while the cluster changes under it. Rows are `load`'s
//! generated rows (`id` = the given ids).
//!
//! ```text
//! cargo run --release --example session -- --server HOST:PORT --table T [--timeout-secs 30]
//!
//! append LO HI   → acknowledged N unacked IDS     (IDS: ranges "a-b,c" or "-")
//! upsert LO HI   → acknowledged N unacked IDS
//! lookup LO HI   → found N                       (every found row checked)
//! columns LO HI  → columns C1,C2,… rows R1;R2;…   (a lookup of ids LO..=HI by a bigint `id`
//!                                                 key through the cached table, rows as text)
//! delete LO HI   → deleted N
//! scan           → rows N distinct D
//! leader I       → leader ADDR|none               (the cached leader of bucket index I)
//! ```
//!
//! A failed command answers `error MESSAGE` (for writes, after the
//! acknowledged count: `acknowledged N unacked IDS error MESSAGE`).

mod common;

use std::collections::HashSet;
use std::time::Duration;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use futures::TryStreamExt;
use mink_client::{Client, Config, Error, Outcome, ScanOptions};
use tokio::io::{AsyncBufReadExt, BufReader};

const USAGE: &str = "session --server HOST:PORT --table T [--timeout-secs 30]";

#[tokio::main]
async fn main() {
    let flags = common::Flags::parse(USAGE);
    let server = flags.required("server", USAGE);
    let table = flags.required("table", USAGE);
    let config = Config {
        retry_timeout: Duration::from_secs(flags.number("timeout-secs", 30, USAGE)),
        credentials: common::credentials(),
        tls: common::tls(),
        ..Default::default()
    };
    let client = match Client::connect([server.as_str()], config).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("session: {e}");
            std::process::exit(1);
        }
    };
    println!("ready");
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let words: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| {
            words
                .get(i)
                .and_then(|w| w.parse::<i64>().ok())
                .unwrap_or(0)
        };
        let answer = match words.first().copied() {
            Some(cmd @ ("append" | "upsert")) => {
                write(&client, &table, cmd == "upsert", num(1), num(2)).await
            }
            Some("lookup") => lookup(&client, &table, num(1), num(2))
                .await
                .unwrap_or_else(|e| format!("error {e}")),
            Some("columns") => columns(&client, &table, num(1), num(2))
                .await
                .unwrap_or_else(|e| format!("error {e}")),
            Some("delete") => delete(&client, &table, num(1), num(2))
                .await
                .unwrap_or_else(|e| format!("error {e}")),
            Some("scan") => scan(&client, &table)
                .await
                .unwrap_or_else(|e| format!("error {e}")),
            Some("leader") => leader(&client, &table, num(1) as usize),
            _ => format!("error unknown command {line:?}"),
        };
        println!("{}", answer.replace('\n', " "));
    }
}

fn ranges(ids: &mut [i64]) -> String {
    if ids.is_empty() {
        return "-".into();
    }
    ids.sort_unstable();
    let mut out = Vec::new();
    let mut start = ids[0];
    let mut prev = ids[0];
    for &id in &ids[1..] {
        if id != prev + 1 {
            out.push(if start == prev {
                start.to_string()
            } else {
                format!("{start}-{prev}")
            });
            start = id;
        }
        prev = id;
    }
    out.push(if start == prev {
        start.to_string()
    } else {
        format!("{start}-{prev}")
    });
    out.join(",")
}

async fn write(client: &Client, table: &str, upsert: bool, lo: i64, hi: i64) -> String {
    let result = async {
        let mut w = if upsert {
            client.upsert_writer(table).await?
        } else {
            client.append_writer(table).await?
        };
        let ids: Vec<i64> = (lo..=hi).collect();
        let t = w.table().clone();
        let batch = common::generate(&t.schema(), &ids, t.partition_by())?;
        w.append(batch).await?;
        w.flush().await
    }
    .await;
    match result {
        Ok(done) => format!("acknowledged {} unacked -", done.rows),
        Err(Error::Write(e)) => {
            let mut unacked: Vec<i64> = e
                .unacknowledged
                .iter()
                .flat_map(|u| u.rows.iter().map(|&r| lo + r as i64))
                .collect();
            let unknown: usize = e
                .unacknowledged
                .iter()
                .filter(|u| u.outcome == Outcome::Unknown)
                .map(|u| u.rows.len())
                .sum();
            format!(
                "acknowledged {} unacked {} unknown {unknown} error {e}",
                e.acknowledged,
                ranges(&mut unacked)
            )
        }
        Err(e) => format!(
            "acknowledged 0 unacked {} error {e}",
            ranges(&mut (lo..=hi).collect::<Vec<_>>())
        ),
    }
}

async fn lookup(client: &Client, table: &str, lo: i64, hi: i64) -> Result<String, Error> {
    let t = client.table(table).await?;
    let ids: Vec<i64> = (lo..=hi).collect();
    let rows = common::generate(&t.schema(), &ids, t.partition_by())?;
    let key_idx = t
        .primary_key()
        .iter()
        .map(|k| rows.schema().index_of(k))
        .collect::<Result<Vec<_>, _>>()?;
    let got = client.lookup(table, &rows.project(&key_idx)?).await?;
    let id_col = got.schema().index_of("id")?;
    let got_ids: Vec<i64> = got
        .column(id_col)
        .as_primitive::<Int64Type>()
        .values()
        .to_vec();
    let want = common::generate(&t.schema(), &got_ids, t.partition_by())?;
    if want != got {
        return Err(Error::InvalidArgument(
            "looked-up rows differ from the rows written".into(),
        ));
    }
    Ok(format!("found {}", got.num_rows()))
}

/// Looks ids up without describing the table first, so that the answer
/// shows the columns as the client knows them then.
async fn columns(client: &Client, table: &str, lo: i64, hi: i64) -> Result<String, Error> {
    let keys = arrow_array::RecordBatch::try_from_iter([(
        "id",
        std::sync::Arc::new(arrow_array::Int64Array::from((lo..=hi).collect::<Vec<_>>())) as _,
    )])?;
    let got = client.lookup(table, &keys).await?;
    let names: Vec<&str> = got
        .schema_ref()
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    let text = |c: &dyn arrow_array::Array, r: usize| -> String {
        use arrow_array::types::Int32Type;
        use arrow_schema::DataType;
        if c.is_null(r) {
            return "NULL".into();
        }
        match c.data_type() {
            DataType::Int64 => c.as_primitive::<Int64Type>().value(r).to_string(),
            DataType::Int32 => c.as_primitive::<Int32Type>().value(r).to_string(),
            DataType::Utf8 => c.as_string::<i32>().value(r).to_string(),
            t => format!("<{t}>"),
        }
    };
    let mut rows = Vec::new();
    for r in 0..got.num_rows() {
        let vals: Vec<String> = got.columns().iter().map(|c| text(c.as_ref(), r)).collect();
        rows.push(vals.join(","));
    }
    Ok(format!(
        "columns {} rows {}",
        names.join(","),
        rows.join(";")
    ))
}

async fn delete(client: &Client, table: &str, lo: i64, hi: i64) -> Result<String, Error> {
    let t = client.table(table).await?;
    let ids: Vec<i64> = (lo..=hi).collect();
    let rows = common::generate(&t.schema(), &ids, t.partition_by())?;
    let key_idx = t
        .primary_key()
        .iter()
        .map(|k| rows.schema().index_of(k))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(format!(
        "deleted {}",
        client.delete(table, &rows.project(&key_idx)?).await?
    ))
}

async fn scan(client: &Client, table: &str) -> Result<String, Error> {
    let mut s = client.scan(table, ScanOptions::default()).await?;
    let (mut rows, mut ids) = (0, HashSet::new());
    while let Some(b) = s.try_next().await? {
        rows += b.num_rows();
        let c = b.schema().index_of("id")?;
        ids.extend(
            b.column(c)
                .as_primitive::<Int64Type>()
                .values()
                .iter()
                .copied(),
        );
    }
    Ok(format!("rows {rows} distinct {}", ids.len()))
}

/// The cached leader of bucket index `i`, as the client's view has it now
/// (without asking the cluster).
fn leader(client: &Client, table: &str, i: usize) -> String {
    let view = client.view();
    let bucket = view
        .tables
        .get(table)
        .and_then(|t| t.bucket_ids().get(i).copied());
    match bucket.and_then(|b| view.leader(b)) {
        Some(addr) => format!("leader {addr}"),
        None => "leader none".into(),
    }
}
