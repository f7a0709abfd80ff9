//! mink's Flight wire contract (`docs/flight.md`, Go `internal/flightwire`):
//! descriptors, tickets, per-message metadata, action bodies and error
//! details. Pure functions and plain data.

use std::collections::HashMap;

use arrow_flight::FlightDescriptor;
use serde::{Deserialize, Serialize};

pub(crate) const REASON_NOT_LEADER: &str = "NOT_LEADER";
pub(crate) const REASON_UNAVAILABLE: &str = "BUCKET_UNAVAILABLE";
pub(crate) const REASON_OUTCOME_UNKNOWN: &str = "OUTCOME_UNKNOWN";
pub(crate) const REASON_CONFLICT: &str = "WRITE_CONFLICT";
const DOMAIN: &str = "mink";

pub(crate) const ACTION_DESCRIBE_TABLE: &str = "describe-table";
pub(crate) const ACTION_CREATE_PARTITION: &str = "create-partition";
pub(crate) const ACTION_CLUSTER_STATUS: &str = "cluster-status";
pub(crate) const ACTION_LOOKUP: &str = "lookup";
pub(crate) const ACTION_KV_WRITE: &str = "kv-write";

/// `google.rpc.Status`, as gRPC carries it in `grpc-status-details-bin`.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
    #[prost(message, repeated, tag = "3")]
    details: Vec<Any>,
}

/// `google.protobuf.Any`.
#[derive(Clone, PartialEq, prost::Message)]
struct Any {
    #[prost(string, tag = "1")]
    type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    value: Vec<u8>,
}

/// `google.rpc.ErrorInfo`: mink's error details (domain `mink`).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ErrorInfo {
    #[prost(string, tag = "1")]
    pub reason: String,
    #[prost(string, tag = "2")]
    pub domain: String,
    #[prost(map = "string, string", tag = "3")]
    pub metadata: HashMap<String, String>,
}

/// The mink ErrorInfo in a status's details, if any.
pub(crate) fn error_info(details: &[u8]) -> Option<ErrorInfo> {
    use prost::Message;
    if details.is_empty() {
        return None;
    }
    let st = RpcStatus::decode(details).ok()?;
    st.details
        .iter()
        .filter(|a| a.type_url.ends_with("google.rpc.ErrorInfo"))
        .filter_map(|a| ErrorInfo::decode(a.value.as_slice()).ok())
        .find(|i| i.domain == DOMAIN)
}

/// Encodes details as a server would (for tests).
#[cfg(test)]
pub(crate) fn encode_error_info(code: i32, info: ErrorInfo) -> Vec<u8> {
    use prost::Message;
    RpcStatus {
        code,
        message: String::new(),
        details: vec![Any {
            type_url: "type.googleapis.com/google.rpc.ErrorInfo".into(),
            value: info.encode_to_vec(),
        }],
    }
    .encode_to_vec()
}

/// `host:port` of a Flight location (`grpc+tcp://host:port`, `grpc://`,
/// `grpc+tls://`) or of a bare `host:port`.
///
/// ```
/// assert_eq!(mink_client::parse_location("grpc+tcp://10.0.0.5:8815").unwrap(), "10.0.0.5:8815");
/// assert_eq!(mink_client::parse_location("grpc+tls://db1:8815").unwrap(), "db1:8815");
/// assert!(mink_client::parse_location("https://x:1").is_err());
/// ```
pub fn parse_location(uri: &str) -> Result<String, String> {
    parse_scheme(uri).map(|(addr, _)| addr)
}

/// How a location says to dial its node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheme {
    /// `grpc+tcp://` or `grpc://`: plaintext.
    Tcp,
    /// `grpc+tls://`: TLS.
    Tls,
    /// A bare `host:port`: as the client is configured.
    Bare,
}

/// `host:port` of a location, and its scheme.
pub(crate) fn parse_scheme(uri: &str) -> Result<(String, Scheme), String> {
    let (addr, scheme) = [
        ("grpc+tcp://", Scheme::Tcp),
        ("grpc://", Scheme::Tcp),
        ("grpc+tls://", Scheme::Tls),
    ]
    .iter()
    .find_map(|(prefix, scheme)| uri.strip_prefix(prefix).map(|a| (a, *scheme)))
    .unwrap_or((uri, Scheme::Bare));
    if addr.contains("://") {
        return Err(format!(
            "location {uri:?}: only grpc+tcp:// and grpc+tls:// are served"
        ));
    }
    if addr.is_empty() || !addr.contains(':') {
        return Err(format!("location {uri:?}: want host:port"));
    }
    Ok((addr.trim_end_matches('/').to_string(), scheme))
}

/// The PATH descriptor of one bucket of a table.
pub(crate) fn bucket_descriptor(table: &str, bucket: u64) -> FlightDescriptor {
    FlightDescriptor::new_path(vec![table.to_string(), "bucket".into(), bucket.to_string()])
}

/// The body of a CMD descriptor.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Command<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    pub table: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partitions: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub columns: Option<&'a [String]>,
}

impl Command<'_> {
    pub fn descriptor(&self) -> FlightDescriptor {
        if self.partitions.is_none() && self.columns.is_none() {
            return FlightDescriptor::new_path(vec![self.table.to_string()]);
        }
        // Serializing a struct of strings cannot fail.
        let cmd = serde_json::to_vec(self).unwrap_or_default();
        FlightDescriptor::new_cmd(cmd)
    }
}

/// A DoGet ticket, version 1: the rows of `bucket` at offsets
/// `[from, to)`; for a primary-key bucket its state, or with `changelog`
/// its changelog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Ticket {
    pub v: u32,
    pub bucket: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub from: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub columns: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub changelog: bool,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl Ticket {
    pub fn new(bucket: u64) -> Self {
        Ticket {
            v: 1,
            bucket,
            from: 0,
            to: None,
            columns: None,
            changelog: false,
        }
    }

    pub fn parse(b: &[u8]) -> Result<Self, String> {
        let t: Ticket = serde_json::from_slice(b).map_err(|e| format!("ticket: {e}"))?;
        if t.v != 1 {
            return Err(format!("ticket version {}: this client reads 1", t.v));
        }
        Ok(t)
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// The app_metadata of a DoGet message.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct BatchMeta {
    #[serde(default)]
    pub offset: u64,
}

/// The app_metadata of a DoPut PutResult.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct PutAck {
    #[serde(default)]
    pub rows: i64,
}

/// A table as `describe-table` answers.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct TableInfo {
    pub name: String,
    pub columns: Vec<ColumnInfo>,
    #[serde(default)]
    pub primary_key: Vec<String>,
    #[serde(default)]
    pub partition_by: String,
    #[serde(default)]
    pub bucket_key: Vec<String>,
    #[serde(default)]
    pub bucket_count: usize,
    #[serde(default)]
    pub buckets: Vec<BucketInfo>,
    #[serde(default)]
    pub partitions: Vec<PartitionInfo>,
    /// The columns `ALTER TABLE … DROP COLUMN` dropped, in position
    /// order: gone from `columns`, still in their places in stored rows.
    #[serde(default)]
    pub dropped: Vec<DroppedInfo>,
    /// Identifies `columns` and `dropped`; a lookup's answer carries the
    /// table's tag when it was read.
    #[serde(default)]
    pub schema_tag: String,
}

/// A dropped column's place among a table's stored columns.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct DroppedInfo {
    pub position: usize,
    pub column: ColumnInfo,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ColumnInfo {
    pub name: String,
    #[serde(rename = "type")]
    pub sql_type: String,
    #[serde(default)]
    pub not_null: bool,
    #[serde(default)]
    pub added: bool,
    #[serde(default)]
    pub missing: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct PartitionInfo {
    pub value: String,
    #[serde(default)]
    pub buckets: Vec<BucketInfo>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct BucketInfo {
    pub id: u64,
    #[serde(default)]
    pub location: String,
}

#[derive(Debug, Serialize)]
pub(crate) struct DescribeTable<'a> {
    pub table: &'a str,
}

#[derive(Debug, Serialize)]
pub(crate) struct CreatePartition<'a> {
    pub table: &'a str,
    pub value: &'a str,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct ClusterStatus {
    #[serde(default)]
    pub nodes: Vec<NodeStatus>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct NodeStatus {
    #[serde(default)]
    pub location: String,
}

/// Base64 (standard, padded) as Go's encoding/json writes `[]byte`.
pub(crate) mod b64 {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn encode(b: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(b)
    }

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&encode(v))
    }

    pub fn serialize_vec<S: Serializer>(v: &[Vec<u8>], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|b| encode(b)))
    }

    pub fn deserialize_opt_vec<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<Option<Vec<u8>>>, D::Error> {
        let v: Option<Vec<Option<String>>> = Deserialize::deserialize(d)?;
        v.unwrap_or_default()
            .into_iter()
            .map(|s| {
                s.map(|s| {
                    base64::engine::general_purpose::STANDARD
                        .decode(s)
                        .map_err(serde::de::Error::custom)
                })
                .transpose()
            })
            .collect()
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct LookupRequest {
    pub bucket: u64,
    #[serde(serialize_with = "b64::serialize_vec")]
    pub keys: Vec<Vec<u8>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct LookupResult {
    #[serde(default, deserialize_with = "b64::deserialize_opt_vec")]
    pub rows: Vec<Option<Vec<u8>>>,
    /// The table's schema tag when the node answered (empty from nodes
    /// that predate it).
    #[serde(default)]
    pub schema_tag: String,
}

#[derive(Debug, Serialize)]
pub(crate) struct KvWrite {
    pub op: u8,
    #[serde(serialize_with = "b64::serialize")]
    pub key: Vec<u8>,
}

#[derive(Debug, Serialize)]
pub(crate) struct KvWriteRequest {
    pub bucket: u64,
    pub writes: Vec<KvWrite>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct KvWriteResult {
    #[serde(default)]
    pub records: Vec<serde_json::Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations() {
        assert_eq!(parse_location("grpc+tcp://h:1").unwrap(), "h:1");
        assert_eq!(parse_location("grpc://h:1/").unwrap(), "h:1");
        assert_eq!(parse_location("h:1").unwrap(), "h:1");
        assert_eq!(
            parse_scheme("grpc+tls://h:1").unwrap(),
            ("h:1".to_string(), Scheme::Tls)
        );
        assert_eq!(
            parse_scheme("grpc+tcp://h:1").unwrap(),
            ("h:1".to_string(), Scheme::Tcp)
        );
        assert_eq!(
            parse_scheme("[::1]:1").unwrap(),
            ("[::1]:1".to_string(), Scheme::Bare)
        );
        assert!(parse_location("http://h:1").is_err());
        assert!(parse_location("grpc+tls://h").is_err());
        assert!(parse_location("h").is_err());
        assert!(parse_location("").is_err());
    }

    #[test]
    fn tickets_round_trip_as_go_writes_them() {
        // What Go's flightwire.Ticket{Bucket: 12, To: &4096}.Encode() writes.
        let t = Ticket::parse(br#"{"v":1,"bucket":12,"to":4096}"#).unwrap();
        assert_eq!(
            (t.bucket, t.from, t.to, t.changelog),
            (12, 0, Some(4096), false)
        );
        let mut t2 = t.clone();
        t2.from = 7;
        assert_eq!(t2.encode(), br#"{"v":1,"bucket":12,"from":7,"to":4096}"#);
        assert!(Ticket::parse(br#"{"v":2,"bucket":1}"#).is_err());
        assert!(Ticket::parse(b"nope").is_err());
    }

    #[test]
    fn error_details_decode() {
        let mut md = HashMap::new();
        md.insert("bucket".to_string(), "12".to_string());
        md.insert("to".to_string(), "grpc+tcp://127.0.0.1:9".to_string());
        let b = encode_error_info(
            9,
            ErrorInfo {
                reason: REASON_NOT_LEADER.into(),
                domain: DOMAIN.into(),
                metadata: md,
            },
        );
        let info = error_info(&b).unwrap();
        assert_eq!(info.reason, REASON_NOT_LEADER);
        assert_eq!(info.metadata["bucket"], "12");
        assert!(error_info(b"\xff\xff").is_none());
        assert!(error_info(b"").is_none());
    }
}
