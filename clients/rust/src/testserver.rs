//! A scripted Flight server for the client's tests: each node answers
//! DoPut, DoAction and DoGet from a script, so that the retry loop can be
//! driven through redirects, unavailable buckets, dead nodes and unknown
//! outcomes over real gRPC on loopback.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use arrow_flight::decode::{DecodedPayload, FlightDataDecoder};
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::{FlightService, FlightServiceServer};
use arrow_flight::{
    Action, ActionType, Criteria, Empty, FlightData, FlightDescriptor, FlightInfo,
    HandshakeRequest, HandshakeResponse, PollInfo, PutResult, SchemaResult, Ticket,
};
use futures::stream::BoxStream;
use futures::{Stream, StreamExt, TryStreamExt};
use tonic::{Request, Response, Status, Streaming};

use crate::wire::{self, ErrorInfo};

/// What a node does with the next DoPut.
#[derive(Debug, Clone)]
pub enum Put {
    /// Acknowledge every batch.
    Accept,
    /// Reject with NotLeader, redirecting to this address.
    NotLeader(String),
    /// Reject with BUCKET_UNAVAILABLE.
    Unavailable,
    /// Acknowledge this many batches, then fail with OUTCOME_UNKNOWN.
    AckThenUnknown(usize),
    /// Fail with INVALID_ARGUMENT and this SQLSTATE.
    Invalid(&'static str),
}

/// What a node does with the next DoGet: serve `rows` batches (one message
/// each, from the ticket's `from` on), then end, or fail with NotLeader to
/// `redirect`.
#[derive(Debug, Clone)]
pub struct Get {
    pub rows: Vec<usize>,
    pub redirect: Option<String>,
}

/// The state of one scripted node.
#[derive(Default)]
pub struct Node {
    /// DoPut answers, in order; when empty, Accept.
    pub puts: VecDeque<Put>,
    /// describe-table answers (JSON), in order; the last one repeats.
    pub describes: VecDeque<String>,
    /// Rows of every batch this node acknowledged.
    pub acked_rows: Vec<usize>,
    /// Batches it received, acknowledged or not.
    pub received_batches: usize,
    /// DoPut calls it answered.
    pub do_puts: usize,
    /// DoGet answers, in order; when empty, NotFound.
    pub gets: VecDeque<Get>,
    /// The tickets of the DoGets it answered.
    pub tickets: Vec<wire::Ticket>,
    /// When set, the user and password the basic-auth handshake accepts;
    /// every other call then needs a token it handed out (tok-1, tok-2, …)
    /// and still holds valid.
    pub auth: Option<(String, String)>,
    /// Handshakes it answered.
    pub handshakes: usize,
    /// The tokens it accepts.
    pub valid_tokens: std::collections::HashSet<String>,
}

impl Node {
    /// Refuses a call without a valid token, when the node requires one.
    fn check_auth(&self, md: &tonic::metadata::MetadataMap) -> Result<(), Status> {
        if self.auth.is_none() {
            return Ok(());
        }
        let token = md
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        match token {
            Some(t) if self.valid_tokens.contains(t) => Ok(()),
            _ => Err(Status::unauthenticated("invalid or expired bearer token")),
        }
    }
}

pub type Shared = Arc<Mutex<Node>>;

fn status(code: tonic::Code, reason: &str, md: &[(&str, &str)]) -> Status {
    let info = ErrorInfo {
        reason: reason.to_string(),
        domain: "mink".into(),
        metadata: md
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    let details = wire::encode_error_info(code as i32, info);
    Status::with_details(code, format!("scripted {reason}"), details.into())
}

struct Service {
    node: Shared,
}

type Stream2<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl FlightService for Service {
    type HandshakeStream = Stream2<HandshakeResponse>;
    type ListFlightsStream = Stream2<FlightInfo>;
    type DoGetStream = Stream2<FlightData>;
    type DoPutStream = Stream2<PutResult>;
    type DoActionStream = Stream2<arrow_flight::Result>;
    type ListActionsStream = Stream2<ActionType>;
    type DoExchangeStream = Stream2<FlightData>;

    async fn handshake(
        &self,
        req: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<Self::HandshakeStream>, Status> {
        use base64::Engine;
        let mut n = self.node.lock().unwrap();
        let Some((user, password)) = n.auth.clone() else {
            return Err(Status::unimplemented("handshake"));
        };
        n.handshakes += 1;
        let want = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        );
        if req
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            != Some(want.as_str())
        {
            return Err(Status::unauthenticated("authentication failed"));
        }
        let token = format!("tok-{}", n.handshakes);
        n.valid_tokens.insert(token.clone());
        let mut resp: Response<Self::HandshakeStream> =
            Response::new(Box::pin(futures::stream::empty()));
        resp.metadata_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
        Ok(resp)
    }
    async fn list_flights(
        &self,
        _: Request<Criteria>,
    ) -> Result<Response<Self::ListFlightsStream>, Status> {
        Err(Status::unimplemented("list_flights"))
    }
    async fn get_flight_info(
        &self,
        _: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        Err(Status::unimplemented("get_flight_info"))
    }
    async fn poll_flight_info(
        &self,
        _: Request<FlightDescriptor>,
    ) -> Result<Response<PollInfo>, Status> {
        Err(Status::unimplemented("poll_flight_info"))
    }
    async fn get_schema(
        &self,
        _: Request<FlightDescriptor>,
    ) -> Result<Response<SchemaResult>, Status> {
        Err(Status::unimplemented("get_schema"))
    }
    async fn do_get(&self, req: Request<Ticket>) -> Result<Response<Self::DoGetStream>, Status> {
        self.node.lock().unwrap().check_auth(req.metadata())?;
        let ticket =
            wire::Ticket::parse(&req.into_inner().ticket).map_err(Status::invalid_argument)?;
        let script = {
            let mut n = self.node.lock().unwrap();
            n.tickets.push(ticket.clone());
            n.gets.pop_front()
        };
        let Some(script) = script else {
            return Err(Status::not_found("no ticket scripted"));
        };
        let schema = arrow_schema::Schema::new(vec![arrow_schema::Field::new(
            "id",
            arrow_schema::DataType::Int64,
            true,
        )]);
        let mut offset = ticket.from as usize;
        let mut batches = Vec::new();
        for n in &script.rows {
            let ids = arrow_array::Int64Array::from_iter_values(offset as i64..(offset + n) as i64);
            let b =
                arrow_array::RecordBatch::try_new(Arc::new(schema.clone()), vec![Arc::new(ids)])
                    .unwrap();
            batches.push((offset, b));
            offset += n;
        }
        let mut msgs: Vec<Result<FlightData, Status>> = Vec::new();
        let data =
            arrow_flight::utils::batches_to_flight_data(&schema, batches.iter().map(|(_, b)| b))
                .unwrap();
        let mut data = data.into_iter();
        if let Some(schema_msg) = data.next() {
            msgs.push(Ok(schema_msg));
        }
        for (msg, (off, _)) in data.zip(&batches) {
            let mut msg = msg;
            msg.app_metadata = format!(r#"{{"offset": {off}}}"#).into_bytes().into();
            msgs.push(Ok(msg));
        }
        if let Some(to) = script.redirect {
            let to = location(&to);
            msgs.push(Err(status(
                tonic::Code::FailedPrecondition,
                wire::REASON_NOT_LEADER,
                &[("bucket", "1"), ("to", &to), ("leader", "2")],
            )));
        }
        Ok(Response::new(Box::pin(futures::stream::iter(msgs))))
    }
    async fn do_exchange(
        &self,
        _: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoExchangeStream>, Status> {
        Err(Status::unimplemented("do_exchange"))
    }
    async fn list_actions(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<Self::ListActionsStream>, Status> {
        Err(Status::unimplemented("list_actions"))
    }

    async fn do_action(
        &self,
        req: Request<Action>,
    ) -> Result<Response<Self::DoActionStream>, Status> {
        self.node.lock().unwrap().check_auth(req.metadata())?;
        let action = req.into_inner();
        let body = match action.r#type.as_str() {
            "cluster-status" => r#"{"nodes": []}"#.to_string(),
            "describe-table" => {
                let mut n = self.node.lock().unwrap();
                let d = if n.describes.len() > 1 {
                    n.describes.pop_front()
                } else {
                    n.describes.front().cloned()
                };
                d.ok_or_else(|| Status::not_found("no table"))?
            }
            t => return Err(Status::unimplemented(t.to_string())),
        };
        let out =
            futures::stream::once(async move { Ok(arrow_flight::Result { body: body.into() }) });
        Ok(Response::new(Box::pin(out)))
    }

    async fn do_put(
        &self,
        req: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoPutStream>, Status> {
        let script = {
            let mut n = self.node.lock().unwrap();
            n.check_auth(req.metadata())?;
            n.do_puts += 1;
            n.puts.pop_front().unwrap_or(Put::Accept)
        };
        match &script {
            Put::NotLeader(to) => {
                let to = location(to);
                return Err(status(
                    tonic::Code::FailedPrecondition,
                    wire::REASON_NOT_LEADER,
                    &[("bucket", "1"), ("to", &to), ("leader", "2")],
                ));
            }
            Put::Unavailable => {
                return Err(status(
                    tonic::Code::Unavailable,
                    wire::REASON_UNAVAILABLE,
                    &[("bucket", "1")],
                ))
            }
            Put::Invalid(sqlstate) => {
                return Err(status(
                    tonic::Code::InvalidArgument,
                    &format!("SQLSTATE_{sqlstate}"),
                    &[("sqlstate", sqlstate)],
                ))
            }
            Put::Accept | Put::AckThenUnknown(_) => {}
        }
        let node = self.node.clone();
        let mut batches = FlightDataDecoder::new(req.into_inner().map_err(FlightError::from));
        let out: BoxStream<'static, Result<PutResult, Status>> =
            Box::pin(async_stream(move |tx| async move {
                let mut acked = 0;
                let mut offset = 0;
                while let Some(msg) = batches.next().await {
                    let msg = match msg {
                        Ok(m) => m,
                        Err(e) => {
                            let _ = tx.send(Err(Status::internal(e.to_string()))).await;
                            return;
                        }
                    };
                    let DecodedPayload::RecordBatch(b) = msg.payload else {
                        continue;
                    };
                    node.lock().unwrap().received_batches += 1;
                    if let Put::AckThenUnknown(n) = script {
                        if acked == n {
                            let st = status(
                                tonic::Code::Unknown,
                                wire::REASON_OUTCOME_UNKNOWN,
                                &[("bucket", "1")],
                            );
                            let _ = tx.send(Err(st)).await;
                            return;
                        }
                    }
                    node.lock().unwrap().acked_rows.push(b.num_rows());
                    let ack = format!(
                        r#"{{"bucket": 1, "offset": {offset}, "rows": {}}}"#,
                        b.num_rows()
                    );
                    offset += b.num_rows();
                    acked += 1;
                    let _ = tx
                        .send(Ok(PutResult {
                            app_metadata: ack.into_bytes().into(),
                        }))
                        .await;
                }
            }));
        Ok(Response::new(out))
    }
}

/// A stream fed by a task through a channel.
fn async_stream<T, F, Fut>(f: F) -> impl Stream<Item = T>
where
    T: Send + 'static,
    F: FnOnce(tokio::sync::mpsc::Sender<T>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(f(tx));
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// The location of a node: `addr` as given when it has a scheme, else
/// `grpc+tcp://addr`.
fn location(addr: &str) -> String {
    if addr.contains("://") {
        addr.to_string()
    } else {
        format!("grpc+tcp://{addr}")
    }
}

/// Starts a scripted node on a loopback port.
pub async fn start(node: Shared) -> SocketAddr {
    start_with(node, None).await
}

/// Starts a scripted node on a loopback port that serves TLS only.
pub async fn start_tls(node: Shared, tls: tonic::transport::ServerTlsConfig) -> SocketAddr {
    start_with(node, Some(tls)).await
}

async fn start_with(node: Shared, tls: Option<tonic::transport::ServerTlsConfig>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let mut server = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        server = server.tls_config(tls).unwrap();
    }
    tokio::spawn(async move {
        server
            .add_service(FlightServiceServer::new(Service { node }))
            .serve_with_incoming(incoming)
            .await
    });
    addr
}

/// A free loopback address with nothing listening.
pub fn dead_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// describe-table's answer for table `t` (id bigint) with one bucket (id 1)
/// led at `leader` ("" for none; `host:port` is `grpc+tcp://host:port`).
pub fn describe(leader: &str) -> String {
    let loc = if leader.is_empty() {
        String::new()
    } else {
        location(leader)
    };
    format!(
        r#"{{"name": "t", "columns": [{{"name": "id", "type": "bigint"}}], "bucket_count": 1,
            "buckets": [{{"id": 1, "leader": 1, "location": "{loc}"}}]}}"#
    )
}
