//! The client's one error type.

use std::fmt;

use tonic::Code;

use crate::wire::{self, ErrorInfo};

/// A result with the client's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in a call of the client.
///
/// The variants a caller acts on are the ones of the server's error table
/// (`docs/flight.md`, "Errors"): [`Error::NotLeader`] and
/// [`Error::Unavailable`] are retried by the client itself until the call's
/// deadline and only surface inside [`Error::RetriesExhausted`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Another node leads the bucket; `to` is its address (`host:port`).
    #[error("bucket {bucket}: not the leader here, the leader is at {to}: {message}")]
    NotLeader {
        /// The bucket.
        bucket: u64,
        /// The leader's Flight address, `host:port`.
        to: String,
        /// The server's message.
        message: String,
    },
    /// The bucket is opening, has no leader yet, or the node cannot be
    /// reached. Worth retrying after a pause.
    #[error("unavailable{}: {message}", fmt_bucket(*bucket))]
    Unavailable {
        /// The bucket, when the server named one.
        bucket: Option<u64>,
        /// The server's or the transport's message.
        message: String,
    },
    /// A precondition failed that is not a redirect: the request acted for
    /// an epoch the cluster has moved past.
    #[error("fenced: {0}")]
    Fenced(String),
    /// A write found another row than it expected (a duplicate key of an
    /// insert, or a conditional write's conflict); nothing was written.
    #[error("conflict in bucket {bucket}: {message}")]
    Conflict {
        /// The bucket.
        bucket: u64,
        /// The server's message.
        message: String,
    },
    /// The rows or keys do not fit the table (a missing or mistyped column,
    /// a null key, a value that breaks a constraint). `sqlstate` is the
    /// PostgreSQL SQLSTATE the server named, if any.
    #[error("schema: {message}{}", fmt_sqlstate(sqlstate))]
    Schema {
        /// What does not fit.
        message: String,
        /// The SQLSTATE, for example `23502` (a null in a NOT NULL column).
        sqlstate: Option<String>,
    },
    /// The table does not exist (or was dropped).
    #[error("no such table {0:?}")]
    NoSuchTable(String),
    /// The call does not apply to this kind of table (an append to a
    /// primary-key table, a lookup in a log table).
    #[error("wrong kind of table: {0}")]
    WrongKind(String),
    /// A write failed in a way that does not say whether the rows were
    /// stored (the connection broke during the call, or the server's storage
    /// could not tell). Check before writing them again.
    #[error("write outcome unknown: {0}")]
    OutcomeUnknown(String),
    /// Some rows of a flush were not acknowledged; the error lists them.
    #[error("{0}")]
    Write(Box<crate::WriteError>),
    /// Retrying gave up at the call's deadline; `last` is the last failure.
    #[error("gave up retrying after {attempts} attempts: {last}")]
    RetriesExhausted {
        /// How many attempts were made.
        attempts: u32,
        /// The last failure.
        last: Box<Error>,
    },
    /// gRPC could not carry the call: the node could not be reached, or the
    /// connection broke.
    #[error("transport: {0}")]
    Transport(String),
    /// The server answered with a status the client does not act on.
    #[error("server: {code:?}: {message}")]
    Server {
        /// The gRPC code.
        code: Code,
        /// The server's message.
        message: String,
    },
    /// An answer the client could not understand.
    #[error("protocol: {0}")]
    Protocol(String),
    /// Arrow could not build, encode or decode a batch.
    #[error("arrow: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    /// The caller gave the client something it cannot use.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The node did not accept the credentials ([`Config::credentials`](crate::Config)):
    /// a wrong user or password, a role that may not log in, none given to
    /// a cluster that requires them, or too many failed logins from this
    /// address.
    #[error("unauthenticated: {0}")]
    Unauthenticated(String),
    /// The role lacks the table privilege the call needs (SELECT to scan or
    /// look up, INSERT to append, INSERT and UPDATE to upsert, DELETE to
    /// delete).
    #[error("{0}")]
    PermissionDenied(String),
    /// TLS with a node failed ([`Config::tls`](crate::Config)): its
    /// certificate did not verify against the CA or the name, or it does
    /// not serve TLS. Not retried: it fails the same way until a
    /// certificate or the configuration changes. (A node that refuses the
    /// client's certificate closes the connection after the handshake:
    /// that is an [`Error::Transport`] naming the alert.)
    #[error("TLS: {0}")]
    Tls(String),
    /// The client was closed.
    #[error("client closed")]
    Closed,
}

fn fmt_bucket(bucket: Option<u64>) -> String {
    bucket.map(|b| format!(" (bucket {b})")).unwrap_or_default()
}

fn fmt_sqlstate(sqlstate: &Option<String>) -> String {
    sqlstate
        .as_ref()
        .map(|s| format!(" (SQLSTATE {s})"))
        .unwrap_or_default()
}

impl Error {
    /// The error without [`Error::RetriesExhausted`] around it.
    ///
    /// ```
    /// use mink_client::Error;
    /// let e = Error::RetriesExhausted {
    ///     attempts: 3,
    ///     last: Box::new(Error::Unavailable { bucket: Some(4), message: "opening".into() }),
    /// };
    /// assert!(matches!(e.root(), Error::Unavailable { bucket: Some(4), .. }));
    /// ```
    pub fn root(&self) -> &Error {
        match self {
            Error::RetriesExhausted { last, .. } => last.root(),
            e => e,
        }
    }
}

/// How a failed call is retried, decided from its status alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Class {
    /// NotLeader: retry at `to` (`host:port`).
    Redirect { to: String },
    /// BUCKET_UNAVAILABLE: the node answered; retry there after a pause.
    BucketUnavailable,
    /// UNAVAILABLE without mink details: gRPC could not reach the node, or
    /// the connection broke.
    Unreachable,
    /// OUTCOME_UNKNOWN.
    OutcomeUnknown,
    /// UNAUTHENTICATED: the node refused the call's token (or the
    /// handshake) before doing anything.
    Unauthenticated,
    /// Anything else: not retried.
    Final,
}

/// A status with its mink error details, if any.
pub(crate) struct StatusError {
    pub code: Code,
    pub message: String,
    pub info: Option<ErrorInfo>,
    /// Why TLS with the node failed (rustls's error), when that is what
    /// the status is: gRPC's own, made when the connection failed.
    pub tls: Option<String>,
}

impl StatusError {
    /// A status without mink's details.
    pub fn new(code: Code, message: String) -> Self {
        StatusError {
            code,
            message,
            info: None,
            tls: None,
        }
    }

    pub fn from_status(st: &tonic::Status) -> Self {
        // gRPC's own statuses say only "transport error": the cause is in
        // the source chain.
        let message = match std::error::Error::source(st) {
            Some(cause) if st.details().is_empty() => {
                let chain = error_chain(cause);
                if chain.starts_with(st.message()) {
                    chain
                } else {
                    format!("{}: {chain}", st.message())
                }
            }
            _ => st.message().to_string(),
        };
        StatusError {
            code: st.code(),
            message,
            info: wire::error_info(st.details()),
            tls: tls_failure(st),
        }
    }

    fn reason(&self) -> &str {
        self.info.as_ref().map(|i| i.reason.as_str()).unwrap_or("")
    }

    fn meta(&self, key: &str) -> Option<&str> {
        self.info
            .as_ref()
            .and_then(|i| i.metadata.get(key))
            .map(String::as_str)
    }

    fn bucket(&self) -> Option<u64> {
        self.meta("bucket").and_then(|b| b.parse().ok())
    }

    /// How the client retries this status.
    pub fn class(&self) -> Class {
        if self.tls.is_some() {
            return Class::Final;
        }
        match (self.code, self.reason()) {
            (Code::FailedPrecondition, wire::REASON_NOT_LEADER) => {
                match self.meta("to").map(wire::parse_location) {
                    Some(Ok(to)) => Class::Redirect { to },
                    _ => Class::Final,
                }
            }
            (Code::Unavailable, wire::REASON_UNAVAILABLE) => Class::BucketUnavailable,
            (Code::Unavailable, _) => Class::Unreachable,
            (Code::Unknown, wire::REASON_OUTCOME_UNKNOWN) => Class::OutcomeUnknown,
            (Code::Unauthenticated, _) => Class::Unauthenticated,
            _ => Class::Final,
        }
    }

    /// The typed error of this status; `table` names the table for
    /// NotFound.
    pub fn into_error(self, table: &str) -> Error {
        if let Some(why) = self.tls {
            return Error::Tls(why);
        }
        let bucket = self.bucket();
        match (self.code, self.reason()) {
            (Code::FailedPrecondition, wire::REASON_NOT_LEADER) => Error::NotLeader {
                bucket: bucket.unwrap_or(0),
                to: self
                    .meta("to")
                    .and_then(|t| wire::parse_location(t).ok())
                    .unwrap_or_default(),
                message: self.message,
            },
            (Code::FailedPrecondition, _) => Error::Fenced(self.message),
            (Code::Unavailable, wire::REASON_UNAVAILABLE) => Error::Unavailable {
                bucket,
                message: self.message,
            },
            // gRPC's own statuses, without mink's details: the node could
            // not be reached, or the connection broke.
            (Code::Unavailable | Code::Unknown, "") if self.info.is_none() => {
                Error::Transport(self.message)
            }
            (Code::Unavailable, _) => Error::Unavailable {
                bucket,
                message: self.message,
            },
            (Code::Unknown, wire::REASON_OUTCOME_UNKNOWN) => Error::OutcomeUnknown(self.message),
            (Code::NotFound, _) => Error::NoSuchTable(table.to_string()),
            (Code::AlreadyExists, _) | (Code::Aborted, wire::REASON_CONFLICT) => Error::Conflict {
                bucket: bucket.unwrap_or(0),
                message: self.message,
            },
            (Code::Unauthenticated, _) => Error::Unauthenticated(self.message),
            (Code::PermissionDenied, _) => Error::PermissionDenied(self.message),
            (Code::InvalidArgument, _) => Error::Schema {
                sqlstate: self.meta("sqlstate").map(str::to_string),
                message: self.message,
            },
            (code, _) => Error::Server {
                code,
                message: self.message,
            },
        }
    }
}

/// `e` and its sources, as "e: source: source's source".
pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let msg = c.to_string();
        if !s.ends_with(&msg) {
            s.push_str(": ");
            s.push_str(&msg);
        }
        cause = c.source();
    }
    s
}

/// The TLS failure among the causes of `e`, if any: a rustls error, which
/// tokio-rustls hands up inside an `io::Error`. A handshake that breaks
/// off (the node went away) is an I/O error, not one of these.
fn tls_failure(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cause = e.source();
    while let Some(c) = cause {
        if let Some(t) = c.downcast_ref::<rustls::Error>() {
            return Some(t.to_string());
        }
        if let Some(t) = c
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            return Some(t.to_string());
        }
        cause = c.source();
    }
    None
}

impl fmt::Display for StatusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)
    }
}

impl From<tonic::Status> for Error {
    fn from(st: tonic::Status) -> Self {
        StatusError::from_status(&st).into_error("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn st(code: Code, reason: &str, md: &[(&str, &str)]) -> StatusError {
        StatusError {
            code,
            message: "m".into(),
            tls: None,
            info: (!reason.is_empty()).then(|| ErrorInfo {
                reason: reason.into(),
                domain: "mink".into(),
                metadata: md
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<HashMap<_, _>>(),
            }),
        }
    }

    #[test]
    fn statuses_map_to_typed_errors_and_retry_classes() {
        let nl = st(
            Code::FailedPrecondition,
            "NOT_LEADER",
            &[("bucket", "3"), ("to", "grpc+tcp://h:9")],
        );
        assert_eq!(nl.class(), Class::Redirect { to: "h:9".into() });
        assert!(
            matches!(nl.into_error("t"), Error::NotLeader { bucket: 3, ref to, .. } if to == "h:9")
        );
        // A redirect without a usable location is not followed.
        assert_eq!(
            st(
                Code::FailedPrecondition,
                "NOT_LEADER",
                &[("to", "http://x")]
            )
            .class(),
            Class::Final
        );
        assert!(matches!(
            st(Code::FailedPrecondition, "", &[]).into_error("t"),
            Error::Fenced(_)
        ));
        let un = st(Code::Unavailable, "BUCKET_UNAVAILABLE", &[("bucket", "4")]);
        assert_eq!(un.class(), Class::BucketUnavailable);
        assert!(matches!(
            un.into_error("t"),
            Error::Unavailable {
                bucket: Some(4),
                ..
            }
        ));
        let gone = st(Code::Unavailable, "", &[]);
        assert_eq!(gone.class(), Class::Unreachable);
        assert!(matches!(gone.into_error("t"), Error::Transport(_)));
        let unknown = st(Code::Unknown, "OUTCOME_UNKNOWN", &[]);
        assert_eq!(unknown.class(), Class::OutcomeUnknown);
        assert!(matches!(unknown.into_error("t"), Error::OutcomeUnknown(_)));
        assert!(
            matches!(st(Code::NotFound, "NO_SUCH_TABLE", &[]).into_error("t"), Error::NoSuchTable(ref n) if n == "t")
        );
        assert!(matches!(
            st(Code::AlreadyExists, "DUPLICATE_KEY", &[("bucket", "2")]).into_error("t"),
            Error::Conflict { bucket: 2, .. }
        ));
        assert!(matches!(
            st(Code::Aborted, "WRITE_CONFLICT", &[]).into_error("t"),
            Error::Conflict { .. }
        ));
        let bad = st(
            Code::InvalidArgument,
            "SQLSTATE_22001",
            &[("sqlstate", "22001")],
        );
        assert_eq!(bad.class(), Class::Final);
        assert!(
            matches!(bad.into_error("t"), Error::Schema { sqlstate: Some(ref s), .. } if s == "22001")
        );
        let unauth = st(Code::Unauthenticated, "", &[]);
        assert_eq!(unauth.class(), Class::Unauthenticated);
        assert!(matches!(unauth.into_error("t"), Error::Unauthenticated(_)));
        let denied = st(Code::PermissionDenied, "", &[]);
        assert_eq!(denied.class(), Class::Final);
        assert!(matches!(denied.into_error("t"), Error::PermissionDenied(_)));
        assert!(matches!(
            st(Code::Internal, "", &[]).into_error("t"),
            Error::Server {
                code: Code::Internal,
                ..
            }
        ));
    }

    #[test]
    fn client_types_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<crate::Client>();
        check::<crate::Writer>();
        check::<crate::Error>();
        fn check_send<T: Send>() {}
        check_send::<crate::ScanStream>();
    }
}
