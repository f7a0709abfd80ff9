//! The client: connections, the cluster view, and the one retry loop every
//! call that goes to a bucket's leader runs.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::{Action, HandshakeRequest};
use base64::Engine;
use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::time::Instant;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::service::Interceptor;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

use crate::cluster::ClusterView;
use crate::error::{error_chain, Class, Error, Result, StatusError};
use crate::table::Table;
use crate::tls::{self, TlsConfig};
use crate::wire;

/// The largest gRPC message the client sends or accepts (the server's
/// limit).
pub(crate) const MAX_MESSAGE_BYTES: usize = 256 << 20;

/// A Flight connection to one node; it sends the node's bearer token, if
/// any, with every call.
pub(crate) type Conn = FlightServiceClient<InterceptedService<Channel, Bearer>>;

/// A user and password for a cluster that requires credentials (started
/// with `--superuser-password-file`). `Debug` does not show the password.
///
/// ```
/// let c = mink_client::Credentials::new("alice", "secret");
/// assert_eq!(c.user, "alice");
/// assert!(!format!("{c:?}").contains("secret"));
/// ```
#[derive(Clone)]
pub struct Credentials {
    /// The role to log in as.
    pub user: String,
    /// Its password.
    pub password: String,
}

impl Credentials {
    /// Credentials of `user` with `password`.
    pub fn new(user: impl Into<String>, password: impl Into<String>) -> Self {
        Credentials {
            user: user.into(),
            password: password.into(),
        }
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// The bearer token of one node connection: the handshake sets it, the
/// interceptor adds it to every call, an Unauthenticated answer clears it.
#[derive(Clone, Default)]
pub(crate) struct Bearer(Arc<BearerState>);

#[derive(Default)]
pub(crate) struct BearerState {
    header: RwLock<Option<MetadataValue<Ascii>>>,
    /// Serializes handshakes, so that concurrent first calls make one.
    handshake: tokio::sync::Mutex<()>,
}

impl Bearer {
    fn get(&self) -> Option<MetadataValue<Ascii>> {
        match self.0.header.read() {
            Ok(h) => h.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    fn set(&self, v: Option<MetadataValue<Ascii>>) {
        match self.0.header.write() {
            Ok(mut h) => *h = v,
            Err(p) => *p.into_inner() = v,
        }
    }
}

impl Interceptor for Bearer {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(h) = self.get() {
            req.metadata_mut().insert("authorization", h);
        }
        Ok(req)
    }
}

/// One node's connection.
#[derive(Clone)]
struct NodeConn {
    conn: Conn,
    channel: Channel,
    bearer: Bearer,
}

/// How a [`Client`] behaves. `Config::default()` is what most callers want.
///
/// ```
/// use std::time::Duration;
/// let config = mink_client::Config {
///     retry_timeout: Duration::from_secs(10),
///     ..Default::default()
/// };
/// assert_eq!(config.max_redirects, 5);
/// ```
#[derive(Debug, Clone)]
pub struct Config {
    /// How long one call keeps retrying unavailable buckets and
    /// unreachable nodes before it gives up with
    /// [`Error::RetriesExhausted`]. Default 30 s. [`Client::with_retry_timeout`]
    /// changes it for some calls.
    pub retry_timeout: Duration,
    /// How many NotLeader redirects one attempt follows at once before it
    /// backs off (the cluster's views are changing). Default 5.
    pub max_redirects: u32,
    /// How many buckets a scan reads at once. Default 8.
    pub scan_parallelism: usize,
    /// The timeout of establishing a connection to a node. Default 5 s.
    pub connect_timeout: Duration,
    /// Writers send batches of at most about this many bytes per Flight
    /// message (larger batches are sliced). Default 32 MiB.
    pub max_message_bytes: usize,
    /// The user and password to log in with, for a cluster that requires
    /// credentials. Each node connection runs Flight's basic-auth handshake
    /// before its first call and sends the bearer token it returns with
    /// every call after; when a node refuses an expired token the client
    /// handshakes again and repeats the call (the node refused it before
    /// doing anything). `None` (the default) sends no credentials, which
    /// only a node in trust mode accepts. A call the role lacks the
    /// privilege for fails with [`Error::PermissionDenied`]; wrong
    /// credentials with [`Error::Unauthenticated`].
    pub credentials: Option<Credentials>,
    /// TLS towards every node, for a cluster started with
    /// `--tls-cert-file` (its locations are `grpc+tls://host:port`): the
    /// CA that verifies the nodes' certificates, a client certificate, the
    /// name to verify. `None` (the default): TLS with the system's roots
    /// when a seed given to [`Client::connect`] is `grpc+tls://`, else
    /// plaintext. Every connection the client makes, to a seed, to a
    /// bucket's leader or after a redirect, is dialled the same way.
    pub tls: Option<TlsConfig>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            retry_timeout: Duration::from_secs(30),
            max_redirects: 5,
            scan_parallelism: 8,
            connect_timeout: Duration::from_secs(5),
            max_message_bytes: 32 << 20,
            credentials: None,
            tls: None,
        }
    }
}

/// A client of a mink cluster over Arrow Flight. Cloning is cheap: clones
/// share the connections and the cluster view. Safe to use from many tasks
/// at once.
///
/// ```no_run
/// # async fn f() -> mink_client::Result<()> {
/// use mink_client::{Client, Config};
/// let client = Client::connect(["127.0.0.1:8815"], Config::default()).await?;
/// let table = client.table("clicks").await?;
/// println!("{:?}", table.schema());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
    pub(crate) retry_timeout: Duration,
}

pub(crate) struct Inner {
    pub config: Config,
    /// The current snapshot, replaced whole on every change.
    view: RwLock<Arc<ClusterView>>,
    /// One lazily connected channel per node address.
    conns: Mutex<HashMap<String, NodeConn>>,
    /// How every node is dialled: TLS with this config, or plaintext.
    tls: Option<ClientTlsConfig>,
    /// The next bucket of a batch of a table without a bucket key.
    pub round_robin: AtomicU64,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("view", &self.view())
            .finish()
    }
}

impl Client {
    /// Connects to the cluster reachable at `addrs` (`host:port`,
    /// `grpc+tcp://host:port` or `grpc+tls://host:port`, any nodes of the
    /// cluster): asks the first that answers for the cluster's members,
    /// which become further addresses to ask for metadata. A `grpc+tls://`
    /// seed or [`Config::tls`] makes every connection TLS; a bad TLS
    /// configuration fails here with [`Error::InvalidArgument`].
    pub async fn connect<I, S>(addrs: I, config: Config) -> Result<Client>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let (seeds, schemes): (Vec<_>, Vec<_>) = addrs
            .into_iter()
            .map(|a| wire::parse_scheme(a.as_ref()).map_err(Error::InvalidArgument))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .unzip();
        if seeds.is_empty() {
            return Err(Error::InvalidArgument("no address to connect to".into()));
        }
        let tls = tls::transport(config.tls.as_ref(), &schemes, config.connect_timeout)
            .map_err(|e| Error::InvalidArgument(format!("TLS: {e}")))?;
        let client = Client {
            retry_timeout: config.retry_timeout,
            inner: Arc::new(Inner {
                config,
                view: RwLock::new(Arc::new(ClusterView::new(seeds.clone()))),
                conns: Mutex::new(HashMap::new()),
                tls,
                round_robin: AtomicU64::new(0),
            }),
        };
        // The certificates and key are parsed when an endpoint is made:
        // a bad one fails here rather than in every call.
        client.endpoint(&seeds[0])?;
        let st: wire::ClusterStatus = client
            .any_node_action(wire::ACTION_CLUSTER_STATUS, None::<&()>, "")
            .await?;
        for n in st.nodes {
            if let Ok(addr) = wire::parse_location(&n.location) {
                client.update(|v| v.with_node(&addr));
            }
        }
        Ok(client)
    }

    /// This client with another retry budget per call (sharing everything
    /// else).
    pub fn with_retry_timeout(&self, timeout: Duration) -> Client {
        Client {
            inner: self.inner.clone(),
            retry_timeout: timeout,
        }
    }

    /// The current snapshot of the client's cluster view.
    pub fn view(&self) -> Arc<ClusterView> {
        match self.inner.view.read() {
            Ok(v) => v.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Replaces the view with `f` of the current one.
    pub(crate) fn update(&self, f: impl FnOnce(&ClusterView) -> ClusterView) {
        let mut guard = match self.inner.view.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let next = f(&guard);
        *guard = Arc::new(next);
    }

    pub(crate) fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The connection to `addr`, created lazily (it connects on first use
    /// and reconnects after failures by itself). With credentials, call
    /// [`Client::authenticate`] first.
    pub(crate) fn conn(&self, addr: &str) -> Result<Conn> {
        Ok(self.node_conn(addr)?.conn)
    }

    fn node_conn(&self, addr: &str) -> Result<NodeConn> {
        let mut conns = match self.inner.conns.lock() {
            Ok(c) => c,
            Err(p) => p.into_inner(),
        };
        if let Some(c) = conns.get(addr) {
            return Ok(c.clone());
        }
        let channel = self.endpoint(addr)?.connect_lazy();
        let bearer = Bearer::default();
        let conn = FlightServiceClient::with_interceptor(channel.clone(), bearer.clone())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        let nc = NodeConn {
            conn,
            channel,
            bearer,
        };
        conns.insert(addr.to_string(), nc.clone());
        Ok(nc)
    }

    /// The endpoint of the node at `addr` (`host:port`), over TLS when the
    /// client dials TLS.
    fn endpoint(&self, addr: &str) -> Result<Endpoint> {
        let scheme = if self.inner.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let mut endpoint = Endpoint::from_shared(format!("{scheme}://{addr}"))
            .map_err(|e| Error::InvalidArgument(format!("address {addr:?}: {e}")))?
            .connect_timeout(self.config().connect_timeout)
            .tcp_nodelay(true)
            .initial_stream_window_size(16 << 20)
            .initial_connection_window_size(64 << 20)
            .http2_keep_alive_interval(Duration::from_secs(10))
            .keep_alive_timeout(Duration::from_secs(10));
        if let Some(tls) = &self.inner.tls {
            endpoint = endpoint.tls_config(tls.clone()).map_err(|e| {
                Error::InvalidArgument(format!("TLS towards {addr}: {}", error_chain(&e)))
            })?;
        }
        Ok(endpoint)
    }

    /// Makes sure the connection to `addr` holds a bearer token, running
    /// the basic-auth handshake if it has none. Without credentials it does
    /// nothing. The error is the handshake's status (or InvalidArgument
    /// for a bad address), for the caller to classify.
    pub(crate) async fn authenticate(&self, addr: &str) -> Result<(), StatusError> {
        let Some(creds) = self.config().credentials.clone() else {
            return Ok(());
        };
        let nc = self
            .node_conn(addr)
            .map_err(|e| StatusError::new(tonic::Code::InvalidArgument, e.to_string()))?;
        if nc.bearer.get().is_some() {
            return Ok(());
        }
        let _guard = nc.bearer.0.handshake.lock().await;
        if nc.bearer.get().is_some() {
            return Ok(()); // another call handshook meanwhile
        }
        let header = handshake(nc.channel, &creds).await?;
        nc.bearer.set(Some(header));
        Ok(())
    }

    /// Forgets the token of the connection to `addr`, so that the next
    /// [`Client::authenticate`] handshakes again.
    pub(crate) fn forget_token(&self, addr: &str) {
        let conns = match self.inner.conns.lock() {
            Ok(c) => c,
            Err(p) => p.into_inner(),
        };
        if let Some(c) = conns.get(addr) {
            c.bearer.set(None);
        }
    }

    /// Whether a failure is a refused token that a new handshake may cure:
    /// the client has credentials and the node answered Unauthenticated.
    pub(crate) fn may_reauthenticate(&self, st: &StatusError) -> bool {
        self.config().credentials.is_some() && st.class() == Class::Unauthenticated
    }

    /// The connection to `addr`, authenticated.
    pub(crate) async fn ready_conn(&self, addr: &str) -> Result<Conn, StatusError> {
        self.authenticate(addr).await?;
        self.conn(addr)
            .map_err(|e| StatusError::new(tonic::Code::InvalidArgument, e.to_string()))
    }

    /// The table's routing information, described afresh from any node
    /// (and cached, with its buckets' leaders).
    pub async fn table(&self, name: &str) -> Result<Arc<Table>> {
        self.describe(name).await
    }

    /// The cached table, or a fresh description.
    pub(crate) async fn cached_table(&self, name: &str) -> Result<Arc<Table>> {
        if let Some(t) = self.view().tables.get(name) {
            return Ok(t.clone());
        }
        self.describe(name).await
    }

    pub(crate) async fn describe(&self, name: &str) -> Result<Arc<Table>> {
        let info: wire::TableInfo = self
            .any_node_action(
                wire::ACTION_DESCRIBE_TABLE,
                Some(&wire::DescribeTable { table: name }),
                name,
            )
            .await?;
        self.learn(info)
    }

    pub(crate) async fn create_partition(&self, name: &str, value: &str) -> Result<Arc<Table>> {
        let info: wire::TableInfo = self
            .any_node_action(
                wire::ACTION_CREATE_PARTITION,
                Some(&wire::CreatePartition { table: name, value }),
                name,
            )
            .await?;
        self.learn(info)
    }

    fn learn(&self, info: wire::TableInfo) -> Result<Arc<Table>> {
        let table = Table::from_info(info)?;
        let name = table.name().to_string();
        self.update(|v| v.with_table(table));
        self.view()
            .tables
            .get(&name)
            .cloned()
            .ok_or_else(|| Error::Protocol(format!("table {name:?} vanished from the view")))
    }

    /// Runs an action at the known nodes in turn until one answers with
    /// anything but "unreachable", retrying the round with backoff until
    /// the deadline. Actions run here change nothing but metadata that is
    /// idempotent (create-partition), so they are retried freely.
    pub(crate) async fn any_node_action<B: Serialize, T: DeserializeOwned>(
        &self,
        action: &str,
        body: Option<&B>,
        table: &str,
    ) -> Result<T> {
        let body = match body {
            Some(b) => serde_json::to_vec(b).map_err(|e| Error::InvalidArgument(e.to_string()))?,
            None => Vec::new(),
        };
        let mut retry = Backoff::new(self.retry_timeout);
        loop {
            let nodes = self.view().nodes.clone();
            let mut last = None;
            for addr in nodes {
                let mut reauthenticated = false;
                let st = loop {
                    let mut conn = match self.ready_conn(&addr).await {
                        Ok(c) => c,
                        Err(st) => break st,
                    };
                    match do_action(&mut conn, action, body.clone()).await {
                        Ok(b) => {
                            return serde_json::from_slice(&b).map_err(|e| {
                                Error::Protocol(format!("action {action} result: {e}"))
                            })
                        }
                        // An expired token: handshake again, once.
                        Err(ActionError::Status(st))
                            if !reauthenticated && self.may_reauthenticate(&st) =>
                        {
                            reauthenticated = true;
                            self.forget_token(&addr);
                        }
                        Err(ActionError::Status(st)) => break st,
                    }
                };
                if matches!(st.class(), Class::Unreachable | Class::BucketUnavailable) {
                    last = Some(st.into_error(table));
                } else {
                    return Err(st.into_error(table));
                }
            }
            let last = last.unwrap_or_else(|| Error::Unavailable {
                bucket: None,
                message: "no node to ask".into(),
            });
            retry.wait(last).await?;
        }
    }

    /// A retry loop for one bucket of a table.
    pub(crate) fn retrier<'a>(&'a self, table: &'a str, bucket: u64) -> Retrier<'a> {
        Retrier {
            client: self,
            table,
            bucket,
            backoff: Backoff::new(self.retry_timeout),
            hops: 0,
            addr: None,
            reauthenticated: false,
        }
    }
}

/// The failure of one action call.
pub(crate) enum ActionError {
    Status(StatusError),
}

/// Runs one action and returns its result bodies, concatenated.
pub(crate) async fn do_action(
    conn: &mut Conn,
    action: &str,
    body: Vec<u8>,
) -> Result<Vec<u8>, ActionError> {
    let req = Action {
        r#type: action.to_string(),
        body: body.into(),
    };
    let mut stream = conn
        .do_action(req)
        .await
        .map_err(|st| ActionError::Status(StatusError::from_status(&st)))?
        .into_inner();
    let mut out = Vec::new();
    while let Some(r) = stream.next().await {
        let r = r.map_err(|st| ActionError::Status(StatusError::from_status(&st)))?;
        out.extend_from_slice(&r.body);
    }
    Ok(out)
}

/// Runs Flight's basic-auth handshake on `channel` and returns the
/// `authorization` header the node answered with (`Bearer <token>`), from
/// its headers or trailers. It sends no HandshakeRequest, as arrow-go and
/// pyarrow do not.
async fn handshake(
    channel: Channel,
    creds: &Credentials,
) -> Result<MetadataValue<Ascii>, StatusError> {
    let protocol = |message: String| StatusError::new(tonic::Code::Unauthenticated, message);
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", creds.user, creds.password))
    );
    let value: MetadataValue<Ascii> = basic
        .parse()
        .map_err(|_| protocol("the user or password is not valid in a header".into()))?;
    let mut req = tonic::Request::new(futures::stream::iter(Vec::<HandshakeRequest>::new()));
    req.metadata_mut().insert("authorization", value);
    let mut raw = FlightServiceClient::new(channel);
    let resp = raw
        .handshake(req)
        .await
        .map_err(|st| StatusError::from_status(&st))?;
    let mut header = resp.metadata().get("authorization").cloned();
    let mut stream = resp.into_inner();
    while stream
        .message()
        .await
        .map_err(|st| StatusError::from_status(&st))?
        .is_some()
    {}
    if header.is_none() {
        if let Ok(Some(trailers)) = stream.trailers().await {
            header = trailers.get("authorization").cloned();
        }
    }
    match header {
        Some(h)
            if h.to_str()
                .is_ok_and(|v| v.len() > 7 && v[..7].eq_ignore_ascii_case("bearer ")) =>
        {
            Ok(h)
        }
        _ => Err(protocol(format!(
            "the handshake as {:?} returned no bearer token",
            creds.user
        ))),
    }
}

/// Paces the retries of one call: exponential backoff from 10 ms to 1 s,
/// until the deadline.
pub(crate) struct Backoff {
    deadline: Instant,
    delay: Duration,
    attempts: u32,
}

impl Backoff {
    pub fn new(timeout: Duration) -> Self {
        Backoff {
            deadline: Instant::now() + timeout,
            delay: Duration::from_millis(10),
            attempts: 0,
        }
    }

    /// Sleeps before the next attempt, or gives up with `last` when the
    /// deadline would pass first.
    pub async fn wait(&mut self, last: Error) -> Result<()> {
        self.attempts += 1;
        if Instant::now() + self.delay > self.deadline {
            return Err(Error::RetriesExhausted {
                attempts: self.attempts,
                last: Box::new(last),
            });
        }
        tokio::time::sleep(self.delay).await;
        self.delay = (self.delay * 2).min(Duration::from_secs(1));
        Ok(())
    }
}

/// What a failed attempt at a bucket's leader means for the next one.
pub(crate) enum Failure {
    /// The status says what to do (redirect, unavailable, unreachable)
    /// and the attempt may be repeated.
    Retry(StatusError),
    /// Not to be retried.
    Fatal(Error),
}

/// The retry loop of a call at a bucket's leader: NotLeader updates the
/// cached leader and retries there at once (up to `max_redirects` hops);
/// BUCKET_UNAVAILABLE retries at the same node after a backoff; an
/// unreachable node has every entry it led dropped and the table is
/// described again from any node. Callers loop:
///
/// ```text
/// let mut r = client.retrier(table, bucket);
/// loop {
///     let (addr, conn) = r.leader().await?;
///     match attempt(conn).await {
///         Ok(v) => return Ok(v),
///         Err(f) => r.failed(f).await?,
///     }
/// }
/// ```
pub(crate) struct Retrier<'a> {
    client: &'a Client,
    table: &'a str,
    bucket: u64,
    backoff: Backoff,
    hops: u32,
    addr: Option<String>,
    /// The call handshook again after an Unauthenticated answer.
    reauthenticated: bool,
}

impl Retrier<'_> {
    /// The leader to try next, describing the table when the cache has
    /// none, and backing off while the bucket has no leader.
    pub async fn leader(&mut self) -> Result<(String, Conn)> {
        loop {
            if let Some(addr) = self.client.view().leader(self.bucket) {
                let addr = addr.to_string();
                self.addr = Some(addr.clone());
                match self.client.ready_conn(&addr).await {
                    Ok(conn) => return Ok((addr, conn)),
                    // A leader that cannot be reached to log in is handled
                    // like one that cannot be reached for the call.
                    Err(st) if matches!(st.class(), Class::Unreachable) => {
                        self.failed(Failure::Retry(st)).await?;
                        continue;
                    }
                    Err(st) => return Err(st.into_error(self.table)),
                }
            }
            self.client.describe(self.table).await?;
            if self.client.view().leader(self.bucket).is_none() {
                self.backoff
                    .wait(Error::Unavailable {
                        bucket: Some(self.bucket),
                        message: format!(
                            "bucket {} of table {:?} has no leader yet",
                            self.bucket, self.table
                        ),
                    })
                    .await?;
            }
        }
    }

    /// Decides after a failed attempt: `Ok` to try again, or the error to
    /// return.
    pub async fn failed(&mut self, failure: Failure) -> Result<()> {
        let st = match failure {
            Failure::Fatal(e) => return Err(e),
            Failure::Retry(st) => st,
        };
        let addr = self.addr.clone().unwrap_or_default();
        if !self.reauthenticated && self.client.may_reauthenticate(&st) {
            // The token expired: the node refused the call before doing
            // anything, so it is repeated after a new handshake, once.
            self.reauthenticated = true;
            self.client.forget_token(&addr);
            return Ok(());
        }
        let max = self.client.config().max_redirects;
        let mut next = Next::Fail;
        let (bucket, hops, class) = (self.bucket, self.hops, st.class());
        self.client.update(|v| {
            let (view, n) = after_failure(v, bucket, &addr, &class, hops, max);
            next = n;
            view.unwrap_or_else(|| v.clone())
        });
        match next {
            Next::Now => {
                self.hops += 1;
                Ok(())
            }
            Next::Backoff => {
                self.hops = 0;
                self.backoff.wait(st.into_error(self.table)).await
            }
            Next::Fail => {
                let err = st.into_error(self.table);
                if matches!(err, Error::NoSuchTable(_)) {
                    let t = self.table;
                    self.client.update(|v| v.without_table(t));
                }
                Err(err)
            }
        }
    }
}

/// What a call does after a failed attempt at a bucket's leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Try again at once (at the leader the redirect named).
    Now,
    /// Back off, then try again.
    Backoff,
    /// Give up with the failure's error.
    Fail,
}

/// The decision after an attempt at `addr`, the cached leader of `bucket`,
/// failed with `class`, after `hops` redirects in a row: the new view (if
/// it changes) and what to do next. Pure.
///
/// - NotLeader: the one entry is updated and the call retries there at
///   once, up to `max_redirects` hops in a row; after that the entry is
///   dropped (the views disagree) and the call backs off.
/// - BUCKET_UNAVAILABLE: nothing changes; back off and retry at the same
///   node.
/// - The node cannot be reached: every entry it led is dropped, so that
///   the next attempt describes the table again from any node.
/// - Anything else (Unauthenticated too: [`Retrier::failed`] handshakes
///   again once before it gets here): give up.
pub(crate) fn after_failure(
    view: &ClusterView,
    bucket: u64,
    addr: &str,
    class: &Class,
    hops: u32,
    max_redirects: u32,
) -> (Option<ClusterView>, Next) {
    match class {
        Class::Redirect { to } if hops < max_redirects => {
            (Some(view.with_redirect(bucket, to)), Next::Now)
        }
        Class::Redirect { .. } => (Some(view.without_leader(bucket, addr)), Next::Backoff),
        Class::BucketUnavailable => (None, Next::Backoff),
        Class::Unreachable => (Some(view.without_node(addr)), Next::Backoff),
        Class::OutcomeUnknown | Class::Unauthenticated | Class::Final => (None, Next::Fail),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> ClusterView {
        ClusterView::new(vec!["a:1".into()])
            .with_redirect(1, "a:1")
            .with_redirect(2, "a:1")
            .with_redirect(3, "b:1")
    }

    #[test]
    fn redirect_updates_one_entry_and_retries_at_once() {
        let (v, next) = after_failure(
            &view(),
            1,
            "a:1",
            &Class::Redirect { to: "c:1".into() },
            0,
            5,
        );
        let v = v.unwrap();
        assert_eq!(next, Next::Now);
        assert_eq!(v.leader(1), Some("c:1"));
        assert_eq!(v.leader(2), Some("a:1"));
        assert_eq!(v.leader(3), Some("b:1"));
    }

    #[test]
    fn too_many_redirects_back_off_and_forget() {
        let (v, next) = after_failure(
            &view(),
            1,
            "a:1",
            &Class::Redirect { to: "c:1".into() },
            5,
            5,
        );
        assert_eq!(next, Next::Backoff);
        assert_eq!(
            v.unwrap().leader(1),
            None,
            "the next attempt describes the table"
        );
    }

    #[test]
    fn unavailable_backs_off_at_the_same_leader() {
        let (v, next) = after_failure(&view(), 1, "a:1", &Class::BucketUnavailable, 0, 5);
        assert_eq!(next, Next::Backoff);
        assert!(v.is_none(), "the cache keeps the leader");
    }

    #[test]
    fn dead_node_drops_every_entry_it_led() {
        let (v, next) = after_failure(&view(), 1, "a:1", &Class::Unreachable, 0, 5);
        let v = v.unwrap();
        assert_eq!(next, Next::Backoff);
        assert_eq!(
            (v.leader(1), v.leader(2), v.leader(3)),
            (None, None, Some("b:1"))
        );
    }

    #[test]
    fn other_failures_give_up() {
        for class in [Class::Final, Class::OutcomeUnknown, Class::Unauthenticated] {
            let (v, next) = after_failure(&view(), 1, "a:1", &class, 0, 5);
            assert_eq!(next, Next::Fail);
            assert!(v.is_none());
        }
    }

    #[tokio::test]
    async fn backoff_gives_up_at_the_deadline() {
        let mut b = Backoff::new(Duration::from_millis(50));
        let start = Instant::now();
        let mut waits = 0;
        let err = loop {
            match b
                .wait(Error::Unavailable {
                    bucket: Some(1),
                    message: "opening".into(),
                })
                .await
            {
                Ok(()) => waits += 1,
                Err(e) => break e,
            }
        };
        assert!(waits >= 2, "retried {waits} times");
        assert!(
            start.elapsed() < Duration::from_millis(200),
            "{:?}",
            start.elapsed()
        );
        match err {
            Error::RetriesExhausted { last, .. } => {
                assert!(matches!(*last, Error::Unavailable { .. }))
            }
            e => panic!("{e:?}"),
        }
    }
}
