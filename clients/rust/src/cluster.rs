//! The client's view of the cluster: the nodes to ask for metadata, the
//! tables it has described and the leader of every bucket it knows. A view
//! is an immutable snapshot; every change makes a new one that replaces
//! the old one whole (`Client` keeps it behind a lock held only for the
//! swap), so a call works with one consistent view and never sees a half
//! update. The functions here are pure.

use std::collections::HashMap;
use std::sync::Arc;

use crate::table::Table;

/// A snapshot of what the client knows of the cluster. Every change
/// returns a new view and leaves the old one as it was.
///
/// ```
/// use mink_client::ClusterView;
/// let v0 = ClusterView::new(vec!["a:1".into()]).with_redirect(7, "a:1");
/// let v1 = v0.with_redirect(7, "b:1");         // NotLeader { bucket: 7, to: b:1 }
/// assert_eq!(v1.leader(7), Some("b:1"));
/// assert_eq!(v0.leader(7), Some("a:1"));        // the old snapshot is unchanged
/// assert_eq!(v1.without_node("b:1").leader(7), None); // b:1 unreachable
/// ```
#[derive(Debug, Clone, Default)]
pub struct ClusterView {
    /// The addresses (`host:port`) to ask for metadata: the seeds given to
    /// `connect`, then every node learnt from `cluster-status`.
    pub nodes: Vec<String>,
    /// The cached leader (`host:port`) of every bucket seen.
    pub leaders: HashMap<u64, String>,
    /// The tables described so far, by name.
    pub tables: HashMap<String, Arc<Table>>,
}

impl ClusterView {
    /// A view with these seed nodes.
    pub fn new(seeds: Vec<String>) -> Self {
        ClusterView {
            nodes: seeds,
            ..Default::default()
        }
    }

    /// The view with `addr` among the nodes.
    pub fn with_node(&self, addr: &str) -> Self {
        let mut v = self.clone();
        if !v.nodes.iter().any(|n| n == addr) {
            v.nodes.push(addr.to_string());
        }
        v
    }

    /// The view after a NotLeader redirect of `bucket` to `to`: that one
    /// entry changes.
    pub fn with_redirect(&self, bucket: u64, to: &str) -> Self {
        let mut v = self.clone();
        v.leaders.insert(bucket, to.to_string());
        if !v.nodes.iter().any(|n| n == to) {
            v.nodes.push(to.to_string());
        }
        v
    }

    /// The view without the cached leader of `bucket`, if it is still
    /// `addr` (another call may have learnt a newer one already).
    pub fn without_leader(&self, bucket: u64, addr: &str) -> Self {
        let mut v = self.clone();
        if v.leaders.get(&bucket).map(String::as_str) == Some(addr) {
            v.leaders.remove(&bucket);
        }
        v
    }

    /// The view after `addr` could not be reached: every bucket it was
    /// thought to lead is forgotten, so that the next call re-describes the
    /// table from another node. The node stays a metadata address (it may
    /// come back).
    pub fn without_node(&self, addr: &str) -> Self {
        let mut v = self.clone();
        v.leaders.retain(|_, a| a != addr);
        v
    }

    /// The view after describing a table: its routing information, and the
    /// leaders of its buckets as the answering node's view had them
    /// (buckets without a leader there keep no entry).
    pub fn with_table(&self, table: Table) -> Self {
        let mut v = self.clone();
        for (bucket, leader) in table.leaders() {
            match leader {
                Some(addr) => {
                    v.leaders.insert(*bucket, addr.clone());
                    // Every leader is also a node to ask for metadata when
                    // the seeds are down.
                    if !v.nodes.iter().any(|n| n == addr) {
                        v.nodes.push(addr.clone());
                    }
                }
                None => {
                    v.leaders.remove(bucket);
                }
            }
        }
        v.tables.insert(table.name().to_string(), Arc::new(table));
        v
    }

    /// The view without a table (it was dropped, or is being described
    /// again).
    pub fn without_table(&self, name: &str) -> Self {
        let mut v = self.clone();
        v.tables.remove(name);
        v
    }

    /// The cached leader of a bucket.
    pub fn leader(&self, bucket: u64) -> Option<&str> {
        self.leaders.get(&bucket).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{BucketInfo, ColumnInfo, TableInfo};

    fn table(leaders: &[(u64, &str)]) -> Table {
        Table::from_info(TableInfo {
            name: "t".into(),
            columns: vec![ColumnInfo {
                name: "id".into(),
                sql_type: "bigint".into(),
                ..Default::default()
            }],
            bucket_count: leaders.len(),
            buckets: leaders
                .iter()
                .map(|(id, loc)| BucketInfo {
                    id: *id,
                    location: if loc.is_empty() {
                        String::new()
                    } else {
                        format!("grpc+tcp://{loc}")
                    },
                })
                .collect(),
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn describe_fills_the_cache() {
        let v = ClusterView::new(vec!["a:1".into()]).with_table(table(&[
            (1, "a:1"),
            (2, "b:1"),
            (3, ""),
        ]));
        assert_eq!(v.leader(1), Some("a:1"));
        assert_eq!(v.leader(2), Some("b:1"));
        assert_eq!(v.leader(3), None, "a bucket without a leader has no entry");
        assert!(v.tables.contains_key("t"));
        assert_eq!(
            v.nodes,
            vec!["a:1".to_string(), "b:1".to_string()],
            "leaders become metadata nodes"
        );
    }

    #[test]
    fn redirect_changes_one_entry() {
        let v0 = ClusterView::new(vec!["a:1".into()]).with_table(table(&[(1, "a:1"), (2, "a:1")]));
        let v1 = v0.with_redirect(1, "c:1");
        assert_eq!(v1.leader(1), Some("c:1"));
        assert_eq!(v1.leader(2), Some("a:1"), "other buckets keep their leader");
        assert!(
            v1.nodes.contains(&"c:1".to_string()),
            "the new leader is a metadata node"
        );
        // The old snapshot is unchanged: readers holding it see one view.
        assert_eq!(v0.leader(1), Some("a:1"));
    }

    #[test]
    fn dead_node_drops_its_entries_only() {
        let v = ClusterView::new(vec!["a:1".into(), "b:1".into()])
            .with_table(table(&[(1, "a:1"), (2, "b:1"), (3, "a:1")]))
            .without_node("a:1");
        assert_eq!(v.leader(1), None);
        assert_eq!(v.leader(3), None);
        assert_eq!(v.leader(2), Some("b:1"));
        assert_eq!(v.nodes.len(), 2, "the node stays an address to try later");
    }

    #[test]
    fn forgetting_a_leader_keeps_a_newer_one() {
        let v = ClusterView::default().with_redirect(1, "b:1");
        assert_eq!(v.without_leader(1, "a:1").leader(1), Some("b:1"));
        assert_eq!(v.without_leader(1, "b:1").leader(1), None);
    }

    #[test]
    fn stale_leader_after_a_to_b_to_a() {
        // Cached A; the bucket moved to B and back to A. A redirect from B
        // to A must put A back, not loop.
        let v = ClusterView::default()
            .with_redirect(7, "a:1")
            .with_redirect(7, "b:1")
            .with_redirect(7, "a:1");
        assert_eq!(v.leader(7), Some("a:1"));
    }
}
