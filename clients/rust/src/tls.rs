//! TLS towards the nodes' Flight listeners: the configuration a caller
//! gives ([`TlsConfig`]) and the decision, from it and the schemes of the
//! seeds, of how the client dials every node (pure). The client dials all
//! nodes the same way: a mink cluster serves TLS on every node or on none
//! (docs/security.md, "TLS"), and the locations its nodes return carry the
//! scheme they serve.

use std::time::Duration;

use tonic::transport::{Certificate, ClientTlsConfig, Identity};

use crate::wire::Scheme;

/// TLS towards a cluster whose nodes serve it (started with
/// `--tls-cert-file` and `--tls-key-file`; their locations are
/// `grpc+tls://host:port`). The client verifies every node's certificate
/// against `ca_certificate` (or the system's roots) and the host it dials
/// (or `domain_name`), and presents `identity` when the node asks for a
/// client certificate (`--tls-client-ca-file`). `Debug` shows neither the
/// certificates nor the key.
///
/// ```no_run
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// use mink_client::{Client, Config, TlsConfig};
/// let tls = TlsConfig::new(std::fs::read("ca.pem")?)
///     .with_identity(std::fs::read("client.crt")?, std::fs::read("client.key")?)
///     .with_domain_name("localhost"); // the name in the nodes' certificates
/// let config = Config { tls: Some(tls), ..Default::default() };
/// let client = Client::connect(["grpc+tls://127.0.0.1:8815"], config).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct TlsConfig {
    /// PEM certificates of the CAs that signed the nodes' certificates
    /// (the cluster's `--tls-ca-file`). `None`: the system's roots.
    pub ca_certificate: Option<Vec<u8>>,
    /// The client certificate and key to present, for a cluster that
    /// verifies client certificates (`--tls-client-ca-file`). `None`:
    /// the client presents none, which such a cluster accepts too (it
    /// only refuses a certificate its CA did not sign).
    pub identity: Option<TlsIdentity>,
    /// The name to verify every node's certificate against instead of the
    /// host the client dials: for nodes whose locations are IP addresses
    /// their certificates do not name. Every node's certificate must hold
    /// it.
    pub domain_name: Option<String>,
}

/// A client certificate (PEM, optionally followed by its intermediates) and
/// its private key (PEM: PKCS#8, PKCS#1 or SEC1). `Debug` does not show the
/// key.
///
/// ```
/// let id = mink_client::TlsIdentity::new("-----BEGIN CERTIFICATE-----…", "-----BEGIN PRIVATE KEY-----…");
/// assert!(!format!("{id:?}").contains("PRIVATE"));
/// ```
#[derive(Clone)]
pub struct TlsIdentity {
    /// The certificate chain, PEM.
    pub certificate: Vec<u8>,
    /// The private key, PEM.
    pub key: Vec<u8>,
}

impl TlsConfig {
    /// TLS that verifies the nodes' certificates against the CA
    /// certificates in `ca_certificate` (PEM).
    ///
    /// ```
    /// let tls = mink_client::TlsConfig::new("-----BEGIN CERTIFICATE-----\n...");
    /// assert!(tls.ca_certificate.is_some() && tls.identity.is_none());
    /// ```
    pub fn new(ca_certificate: impl Into<Vec<u8>>) -> Self {
        TlsConfig {
            ca_certificate: Some(ca_certificate.into()),
            ..Default::default()
        }
    }

    /// TLS that verifies the nodes' certificates against the system's
    /// roots (what a `grpc+tls://` seed without a `TlsConfig` uses).
    ///
    /// ```
    /// assert!(mink_client::TlsConfig::system_roots().ca_certificate.is_none());
    /// ```
    pub fn system_roots() -> Self {
        TlsConfig::default()
    }

    /// This config presenting the client certificate `certificate` with
    /// its private `key` (both PEM).
    ///
    /// ```
    /// let tls = mink_client::TlsConfig::system_roots().with_identity("cert PEM", "key PEM");
    /// assert_eq!(tls.identity.unwrap().certificate, b"cert PEM");
    /// ```
    pub fn with_identity(self, certificate: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        TlsConfig {
            identity: Some(TlsIdentity::new(certificate, key)),
            ..self
        }
    }

    /// This config verifying every node's certificate against `name`
    /// rather than the host dialled.
    ///
    /// ```
    /// let tls = mink_client::TlsConfig::system_roots().with_domain_name("db.example");
    /// assert_eq!(tls.domain_name.as_deref(), Some("db.example"));
    /// ```
    pub fn with_domain_name(self, name: impl Into<String>) -> Self {
        TlsConfig {
            domain_name: Some(name.into()),
            ..self
        }
    }
}

impl TlsIdentity {
    /// An identity of a certificate chain and its private key, both PEM.
    pub fn new(certificate: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        TlsIdentity {
            certificate: certificate.into(),
            key: key.into(),
        }
    }
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig")
            .field(
                "ca_certificate",
                &match &self.ca_certificate {
                    Some(pem) => format!("<{} bytes of PEM>", pem.len()),
                    None => "<system roots>".into(),
                },
            )
            .field("identity", &self.identity)
            .field("domain_name", &self.domain_name)
            .finish()
    }
}

impl std::fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsIdentity")
            .field(
                "certificate",
                &format!("<{} bytes of PEM>", self.certificate.len()),
            )
            .field("key", &"<redacted>")
            .finish()
    }
}

/// How the client dials every node, from `Config::tls` and the schemes of
/// the seeds: TLS with `tls` when it is set; TLS with the system's roots
/// when a seed is `grpc+tls://`; else plaintext (`None`). Seeds that mix
/// `grpc+tcp://` and `grpc+tls://`, or a `grpc+tcp://` seed with `tls`
/// set, are refused: no cluster serves both. `handshake_timeout` bounds
/// each TLS handshake. Pure; the PEM is parsed when a connection is made
/// (the caller checks the result once on a seed).
pub(crate) fn transport(
    tls: Option<&TlsConfig>,
    seeds: &[Scheme],
    handshake_timeout: Duration,
) -> Result<Option<ClientTlsConfig>, String> {
    let tls_seed = seeds.contains(&Scheme::Tls);
    let tcp_seed = seeds.contains(&Scheme::Tcp);
    if tls_seed && tcp_seed {
        return Err(
            "the seeds mix grpc+tcp:// and grpc+tls://: a cluster serves TLS on every node or on none"
                .into(),
        );
    }
    if tcp_seed && tls.is_some() {
        return Err("a grpc+tcp:// seed with Config::tls: give grpc+tls:// or host:port".into());
    }
    let tls = match tls {
        Some(t) => t.clone(),
        None if tls_seed => TlsConfig::system_roots(),
        None => return Ok(None),
    };
    let mut c = ClientTlsConfig::new().timeout(handshake_timeout);
    c = match &tls.ca_certificate {
        Some(pem) => {
            if !contains(pem, b"-----BEGIN CERTIFICATE-----") {
                return Err("the CA certificate is not PEM (no BEGIN CERTIFICATE)".into());
            }
            c.ca_certificate(Certificate::from_pem(pem))
        }
        None => c.with_native_roots(),
    };
    if let Some(id) = &tls.identity {
        if !contains(&id.certificate, b"-----BEGIN CERTIFICATE-----") {
            return Err("the client certificate is not PEM (no BEGIN CERTIFICATE)".into());
        }
        if !contains(&id.key, b"PRIVATE KEY-----") {
            return Err("the client key is not PEM (no BEGIN … PRIVATE KEY)".into());
        }
        c = c.identity(Identity::from_pem(&id.certificate, &id.key));
    }
    if let Some(name) = &tls.domain_name {
        c = c.domain_name(name.clone());
    }
    Ok(Some(c))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testserver::{self, Node, Put};
    use crate::{Client, Config, Error};
    use arrow_array::{ArrayRef, Int64Array, RecordBatch};
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    use std::sync::{Arc, Mutex};
    use tonic::transport::ServerTlsConfig;

    /// A CA made up for one test.
    struct Ca {
        issuer: CertifiedIssuer<'static, KeyPair>,
    }

    impl Ca {
        fn new() -> Ca {
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            let issuer =
                CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
            Ca { issuer }
        }

        fn pem(&self) -> Vec<u8> {
            self.issuer.pem().into_bytes()
        }

        /// A certificate for `names` (DNS names or IP addresses) and its
        /// key, PEM.
        fn issue(&self, names: &[&str]) -> (String, String) {
            let key = KeyPair::generate().unwrap();
            let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
            let cert = CertificateParams::new(names)
                .unwrap()
                .signed_by(&key, &self.issuer)
                .unwrap();
            (cert.pem(), key.serialize_pem())
        }

        /// A server's TLS config with a certificate for `names`.
        fn server(&self, names: &[&str]) -> ServerTlsConfig {
            let (cert, key) = self.issue(names);
            ServerTlsConfig::new().identity(Identity::from_pem(cert, key))
        }
    }

    fn ids(n: i64) -> RecordBatch {
        let a: ArrayRef = Arc::new(Int64Array::from_iter_values(0..n));
        RecordBatch::try_from_iter([("id", a)]).unwrap()
    }

    /// A scripted node that serves TLS only and describes table `t` as led
    /// at `leader`.
    async fn tls_node(tls: ServerTlsConfig, leader: &str) -> (Arc<Mutex<Node>>, String) {
        let n = Arc::new(Mutex::new(Node::default()));
        let addr = testserver::start_tls(n.clone(), tls).await.to_string();
        let leader = if leader.is_empty() { &addr } else { leader };
        n.lock()
            .unwrap()
            .describes
            .push_back(testserver::describe(&format!("grpc+tls://{leader}")));
        (n, addr)
    }

    fn config(tls: Option<TlsConfig>, timeout_ms: u64) -> Config {
        Config {
            tls,
            retry_timeout: Duration::from_millis(timeout_ms),
            ..Default::default()
        }
    }

    #[test]
    fn seeds_and_config_decide_how_every_node_is_dialled() {
        let ca = TlsConfig::new("-----BEGIN CERTIFICATE-----\n…");
        let t = Duration::from_secs(1);
        use Scheme::*;
        // The config, the seeds' schemes, and TLS or not (or the error).
        type Case<'a> = (Option<&'a TlsConfig>, &'a [Scheme], Result<bool, &'a str>);
        let cases: &[Case] = &[
            (None, &[Bare], Ok(false)),
            (None, &[Tcp, Bare], Ok(false)),
            (None, &[Tls, Bare], Ok(true)), // the system's roots
            (Some(&ca), &[Bare], Ok(true)),
            (Some(&ca), &[Tls, Bare], Ok(true)),
            (None, &[Tcp, Tls], Err("mix")),
            (Some(&ca), &[Tcp], Err("grpc+tcp:// seed with Config::tls")),
        ];
        for (tls, seeds, want) in cases {
            let got = transport(*tls, seeds, t).map(|c| c.is_some());
            match (want, &got) {
                (Ok(w), Ok(g)) if w == g => {}
                (Err(w), Err(g)) if g.contains(w) => {}
                _ => panic!("{tls:?} {seeds:?}: got {got:?}, want {want:?}"),
            }
        }
        let not_pem = [
            TlsConfig::new("not a certificate"),
            TlsConfig::system_roots().with_identity("cert", "-----BEGIN PRIVATE KEY-----"),
            TlsConfig::system_roots().with_identity("-----BEGIN CERTIFICATE-----", "key"),
        ];
        for tls in &not_pem {
            let err = transport(Some(tls), &[Bare], t).unwrap_err();
            assert!(err.contains("not PEM"), "{tls:?}: {err}");
        }
    }

    /// A certificate or key that does not parse fails `connect` at once,
    /// before any call, with InvalidArgument.
    #[tokio::test]
    async fn a_bad_certificate_fails_connect() {
        let dead = testserver::dead_addr().to_string();
        let ca = Ca::new();
        let (cert, _) = ca.issue(&["localhost"]);
        let broken_key = "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n";
        let bad = [
            TlsConfig::new("garbage"),
            TlsConfig::new(ca.pem()).with_identity(cert.clone(), broken_key),
            TlsConfig::new(ca.pem()).with_identity(cert.clone(), "no key at all"),
        ];
        for tls in bad {
            let start = std::time::Instant::now();
            match Client::connect([dead.as_str()], config(Some(tls.clone()), 10_000)).await {
                Err(Error::InvalidArgument(m)) => assert!(m.contains("TLS"), "{m}"),
                r => panic!("{tls:?}: {r:?}"),
            }
            assert!(start.elapsed() < Duration::from_secs(2), "it was retried");
        }
    }

    /// Every connection is TLS: to the seed, to the leader the description
    /// names (a grpc+tls:// location) and to the leader a NotLeader
    /// redirect names; each row is written once.
    #[tokio::test]
    async fn every_node_is_dialled_with_tls_including_after_a_redirect() {
        let ca = Ca::new();
        let names = ["localhost", "127.0.0.1"];
        let (c, c_addr) = tls_node(ca.server(&names), "").await;
        let (b, b_addr) = tls_node(ca.server(&names), &c_addr).await;
        let (a, a_addr) = tls_node(ca.server(&names), &b_addr).await;
        for seed in [format!("grpc+tls://{a_addr}"), a_addr.clone()] {
            b.lock()
                .unwrap()
                .puts
                .push_back(Put::NotLeader(format!("grpc+tls://{c_addr}")));
            let client = Client::connect(
                [seed.as_str()],
                config(Some(TlsConfig::new(ca.pem())), 5_000),
            )
            .await
            .unwrap();
            let mut w = client.append_writer("t").await.unwrap();
            assert_eq!(client.view().leader(1), Some(b_addr.as_str()));
            w.append(ids(10)).await.unwrap();
            assert_eq!(w.flush().await.unwrap().rows, 10, "seed {seed}");
            assert_eq!(
                client.view().leader(1),
                Some(c_addr.as_str()),
                "the redirect was followed"
            );
        }
        assert_eq!(
            c.lock().unwrap().acked_rows,
            vec![10, 10],
            "every row exactly once"
        );
        assert_eq!(a.lock().unwrap().received_batches, 0);
        assert_eq!(b.lock().unwrap().do_puts, 2);

        // Plaintext towards a node that serves TLS does not get through.
        match Client::connect([a_addr.as_str()], config(None, 300)).await {
            Err(e) => assert!(matches!(e.root(), Error::Transport(_)), "{e}"),
            Ok(_) => panic!("plaintext connected to a TLS node"),
        }
        // TLS towards a node that serves plaintext fails at once.
        let plain = testserver::start(Arc::new(Mutex::new(Node::default())))
            .await
            .to_string();
        let tls = Some(TlsConfig::new(ca.pem()));
        let start = std::time::Instant::now();
        match Client::connect([format!("grpc+tls://{plain}")], config(tls, 10_000)).await {
            Err(Error::Tls(m)) => assert!(start.elapsed() < Duration::from_secs(2), "{m}"),
            r => panic!("TLS to a plaintext node: {r:?}"),
        }
    }

    /// The node's certificate is verified: against the CA given (another
    /// CA's certificate, or the system's roots, fail) and against the host
    /// dialled, or `domain_name` for a certificate that does not name the
    /// IP address.
    #[tokio::test]
    async fn the_node_certificate_is_verified() {
        let ca = Ca::new();
        let (_, addr) = tls_node(ca.server(&["localhost"]), "").await;
        let seed = format!("grpc+tls://{addr}");
        // Not retried: the call fails at once, well within its deadline.
        let fails = |tls: Option<TlsConfig>| {
            let seed = seed.clone();
            async move {
                let start = std::time::Instant::now();
                let r = Client::connect([seed.as_str()], config(tls.clone(), 10_000)).await;
                assert!(start.elapsed() < Duration::from_secs(2), "{tls:?}: retried");
                match r {
                    Err(Error::Tls(m)) => m,
                    r => panic!("{tls:?}: {r:?}"),
                }
            }
        };
        // 127.0.0.1 is not in the certificate.
        let e = fails(Some(TlsConfig::new(ca.pem()))).await;
        assert!(e.contains("certificate"), "{e}");
        let e = fails(Some(
            TlsConfig::new(Ca::new().pem()).with_domain_name("localhost"),
        ))
        .await;
        assert!(e.contains("certificate"), "{e}");
        let e = fails(None).await; // the system's roots
        assert!(e.contains("certificate"), "{e}");
        let tls = TlsConfig::new(ca.pem()).with_domain_name("localhost");
        let client = Client::connect([seed.as_str()], config(Some(tls), 5_000))
            .await
            .unwrap();
        client.table("t").await.unwrap();
    }

    /// The client presents its certificate to a node that asks for one;
    /// without it the node refuses the connection.
    #[tokio::test]
    async fn the_client_certificate_is_presented() {
        let ca = Ca::new();
        let server = ca
            .server(&["127.0.0.1"])
            .client_ca_root(Certificate::from_pem(ca.pem()));
        let (_, addr) = tls_node(server, "").await;
        let tls = TlsConfig::new(ca.pem());
        match Client::connect([addr.as_str()], config(Some(tls.clone()), 300)).await {
            // TLS 1.3: the node refuses after the handshake, on the first
            // read.
            Err(e) => assert!(e.to_string().contains("CertificateRequired"), "{e}"),
            Ok(_) => panic!("connected without a client certificate"),
        }
        let (cert, key) = ca.issue(&["client"]);
        let client = Client::connect(
            [addr.as_str()],
            config(Some(tls.with_identity(cert, key)), 5_000),
        )
        .await
        .unwrap();
        client.table("t").await.unwrap();
    }
}
