//! A table as the client routes to it.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_schema::{Schema, SchemaRef};

use crate::error::{Error, Result};
use crate::schema;
use crate::wire::{self, TableInfo};

/// A column of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The column's name.
    pub name: String,
    /// Its SQL type as `\d` prints it (`integer`, `numeric(12,2)`).
    pub sql_type: String,
    /// Whether it is `NOT NULL`.
    pub not_null: bool,
    /// Whether `ALTER TABLE … ADD COLUMN` added it.
    pub added: bool,
    /// The value rows stored without an added column read as (`None`:
    /// NULL), as SQL text.
    pub missing: Option<String>,
}

/// A table's schema, kind, buckets and their leaders, as one node's view
/// had them when the client described it.
///
/// ```
/// # async fn f(client: mink_client::Client) -> mink_client::Result<()> {
/// let t = client.table("clicks").await?;
/// println!("{} buckets, primary key {:?}", t.bucket_ids().len(), t.primary_key());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Table {
    info: TableInfo,
    columns: Vec<Column>,
    schema: SchemaRef,
    /// The unpartitioned table's bucket ids, in index order.
    buckets: Vec<u64>,
    /// The partitions in creation order, each with its bucket ids.
    partitions: Vec<(String, Vec<u64>)>,
    /// The leader of every bucket, `None` while it has none.
    leaders: HashMap<u64, Option<String>>,
}

impl Table {
    pub(crate) fn from_info(info: TableInfo) -> Result<Self> {
        let columns: Vec<Column> = info
            .columns
            .iter()
            .map(|c| Column {
                name: c.name.clone(),
                sql_type: c.sql_type.clone(),
                not_null: c.not_null,
                added: c.added,
                missing: c.missing.clone(),
            })
            .collect();
        let fields = columns
            .iter()
            .map(|c| schema::field(&c.name, &c.sql_type, c.not_null))
            .collect::<Result<Vec<_>>>()
            .map_err(|e| Error::Protocol(format!("table {:?}: {e}", info.name)))?;
        let mut leaders = HashMap::new();
        let mut learn = |bs: &[wire::BucketInfo]| -> Vec<u64> {
            bs.iter()
                .map(|b| {
                    let loc = (!b.location.is_empty())
                        .then(|| wire::parse_location(&b.location).ok())
                        .flatten();
                    leaders.insert(b.id, loc);
                    b.id
                })
                .collect()
        };
        let buckets = learn(&info.buckets);
        let partitions = info
            .partitions
            .iter()
            .map(|p| (p.value.clone(), learn(&p.buckets)))
            .collect();
        Ok(Table {
            schema: Arc::new(Schema::new(fields)),
            columns,
            buckets,
            partitions,
            leaders,
            info,
        })
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// The schema tag the node that described the table gave.
    pub(crate) fn schema_tag(&self) -> &str {
        &self.info.schema_tag
    }

    /// The Arrow schema of the table's rows (what writers send and scans
    /// return), with each column's SQL type in the field metadata.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// The columns.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// The columns stored rows hold: the columns with the dropped ones
    /// back at their places, each with whether it was dropped.
    pub(crate) fn stored_columns(&self) -> Vec<(Column, bool)> {
        let mut out: Vec<(Column, bool)> =
            Vec::with_capacity(self.columns.len() + self.info.dropped.len());
        let mut visible = self.columns.iter();
        for d in &self.info.dropped {
            while out.len() < d.position {
                match visible.next() {
                    Some(c) => out.push((c.clone(), false)),
                    None => break,
                }
            }
            let c = &d.column;
            out.push((
                Column {
                    name: c.name.clone(),
                    sql_type: c.sql_type.clone(),
                    not_null: false,
                    added: c.added,
                    missing: c.missing.clone(),
                },
                true,
            ));
        }
        out.extend(visible.map(|c| (c.clone(), false)));
        out
    }

    /// The primary-key columns; empty for a log table.
    pub fn primary_key(&self) -> &[String] {
        &self.info.primary_key
    }

    /// Whether the table has a primary key.
    pub fn is_primary_key_table(&self) -> bool {
        !self.info.primary_key.is_empty()
    }

    /// The LIST partition column, if the table is partitioned.
    pub fn partition_by(&self) -> Option<&str> {
        (!self.info.partition_by.is_empty()).then_some(self.info.partition_by.as_str())
    }

    /// The columns hashed to pick a bucket; empty: batches go round-robin.
    pub fn bucket_key(&self) -> &[String] {
        &self.info.bucket_key
    }

    /// The number of buckets of the table, or of each partition.
    pub fn bucket_count(&self) -> usize {
        self.info.bucket_count
    }

    /// Every bucket id: the table's, or every partition's in order.
    pub fn bucket_ids(&self) -> Vec<u64> {
        if self.partition_by().is_none() {
            return self.buckets.clone();
        }
        self.partitions
            .iter()
            .flat_map(|(_, b)| b.iter().copied())
            .collect()
    }

    /// The partitions (canonical text) and their bucket ids, in creation
    /// order.
    pub fn partitions(&self) -> &[(String, Vec<u64>)] {
        &self.partitions
    }

    /// The bucket ids of one partition (or of the unpartitioned table for
    /// `None`), in index order.
    pub fn buckets_of(&self, partition: Option<&str>) -> Option<&[u64]> {
        match partition {
            None => Some(&self.buckets),
            Some(p) => self
                .partitions
                .iter()
                .find(|(v, _)| v == p)
                .map(|(_, b)| b.as_slice()),
        }
    }

    /// The leader (`host:port`) of every bucket when the table was
    /// described; `None` while a bucket had no leader.
    pub fn leaders(&self) -> &HashMap<u64, Option<String>> {
        &self.leaders
    }

    pub(crate) fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }
}
