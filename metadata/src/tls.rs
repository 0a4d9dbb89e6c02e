//! Mutual TLS on the metadata port, and who may ask what of it.
//!
//! Every connection presents a certificate signed by the cluster CA; its role is the URI SAN,
//! SPIFFE-style: `spiffe://DOMAIN/floe/peer/N` (a metadata node), `.../agent/N`,
//! `.../operator/NAME`, all in the trust domain of this process's own certificate. A connection
//! without such a certificate fails its handshake: nothing is read from it, nothing answered.
//! Clients also check the server: its certificate must name the address dialled (a DNS or IP
//! SAN) and carry the peer role.
//!
//! The configuration is process-wide ([`install`]): one process speaks the metadata protocol
//! with one identity, and every connection it opens (Raft replication, forwarding, the agent's
//! proposals and change stream, `floe admin`) uses it. Agents also ask each other for object
//! blocks with it ([`dial_agent`], [`accept_agent`]): both sides must be of role agent, and an
//! agent's certificate, which names no address, is checked for its chain and role only.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// Time a TLS handshake may take, either side: a stranger cannot hold a connection open longer.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// PEM files for this process's identity and the cluster CA.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
}

/// What a certificate's URI SAN says its holder is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    Peer(u64),
    Agent(u64),
    Operator(String),
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {path}: {reason}")]
    Read { path: PathBuf, reason: String },
    #[error("TLS configuration: {0}")]
    Config(String),
    #[error("the certificate in {0} has no spiffe://DOMAIN/floe/{{peer,agent,operator}}/ID URI SAN")]
    NoRole(PathBuf),
    #[error("metadata mutual TLS is already configured in this process")]
    AlreadyInstalled,
}

/// This process's side of metadata mutual TLS.
pub struct MetadataTls {
    acceptor: tokio_rustls::TlsAcceptor,
    connector: tokio_rustls::TlsConnector,
    /// For another agent's peer listener: the chain is checked, not the address.
    agent_connector: tokio_rustls::TlsConnector,
    domain: String,
    role: Role,
}

impl std::fmt::Debug for MetadataTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetadataTls").field("domain", &self.domain).field("role", &self.role).finish()
    }
}

static INSTALLED: OnceLock<MetadataTls> = OnceLock::new();
/// The HTTP operator API's token (`--operator-token-file`): an agent sends it with the
/// operator-only commands that API proposes, a metadata node checks it.
static OPERATOR_TOKEN: OnceLock<String> = OnceLock::new();

/// Turns on mutual TLS for every metadata connection this process serves or opens.
pub fn install(tls: MetadataTls) -> Result<(), TlsError> {
    INSTALLED.set(tls).map_err(|_| TlsError::AlreadyInstalled)
}

/// The installed configuration, if any (none: plaintext, `floe dev` on loopback).
pub(crate) fn installed() -> Option<&'static MetadataTls> {
    INSTALLED.get()
}

/// Sets the operator token this process relays (an agent) or checks (a metadata node).
pub fn install_operator_token(token: &str) -> Result<(), TlsError> {
    OPERATOR_TOKEN.set(token.trim().to_owned()).map_err(|_| TlsError::AlreadyInstalled)
}

/// The token to send with an operator-only command: only over mutual TLS, never in the clear.
pub(crate) fn relayed_operator_token() -> Option<&'static str> {
    installed()?;
    OPERATOR_TOKEN.get().map(String::as_str)
}

/// Whether `presented` is the installed operator token (in time independent of where it differs).
pub(crate) fn operator_token_matches(presented: &str) -> bool {
    let Some(token) = OPERATOR_TOKEN.get() else { return false };
    let (a, b) = (token.as_bytes(), presented.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

fn read(path: &Path, what: &str, e: impl std::fmt::Display) -> TlsError {
    TlsError::Read { path: path.to_owned(), reason: format!("{what}: {e}") }
}

impl MetadataTls {
    /// Loads the identity and CA; the role and trust domain come from the certificate.
    pub fn load(files: &TlsFiles) -> Result<Self, TlsError> {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
            .and_then(|certs| certs.collect::<Result<_, _>>())
            .map_err(|e| read(&files.cert, "certificates", e))?;
        let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| read(&files.key, "private key", e))?;
        let mut roots = rustls::RootCertStore::empty();
        let ca_certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.ca)
            .and_then(|certs| certs.collect::<Result<_, _>>())
            .map_err(|e| read(&files.ca, "CA certificates", e))?;
        for ca in ca_certs {
            roots.add(ca).map_err(|e| read(&files.ca, "CA certificate", e))?;
        }
        if roots.is_empty() {
            return Err(read(&files.ca, "CA certificates", "none in the file"));
        }
        let leaf = certs.first().ok_or_else(|| read(&files.cert, "certificates", "none in the file"))?;
        let (domain, role) = identity(leaf).ok_or_else(|| TlsError::NoRole(files.cert.clone()))?;
        let roots = Arc::new(roots);
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = |e: rustls::Error| TlsError::Config(e.to_string());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(config)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs.clone(), key.clone_key())
            .map_err(config)?;
        let chain_only = rustls::client::WebPkiServerVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let agent_client = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(config)?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnly(chain_only)))
            .with_client_auth_cert(certs.clone(), key.clone_key())
            .map_err(config)?;
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(config)?
            .with_root_certificates(roots)
            .with_client_auth_cert(certs, key)
            .map_err(config)?;
        Ok(Self {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(server)),
            connector: tokio_rustls::TlsConnector::from(Arc::new(client)),
            agent_connector: tokio_rustls::TlsConnector::from(Arc::new(agent_client)),
            domain,
            role,
        })
    }

    /// This process's own role.
    pub fn role(&self) -> &Role {
        &self.role
    }

    /// The role of the certificate the other side presented, if it is of our trust domain.
    fn role_of(&self, certs: Option<&[CertificateDer<'_>]>) -> Option<Role> {
        let (domain, role) = identity(certs?.first()?)?;
        (domain == self.domain).then_some(role)
    }

    /// Completes the server side of a handshake and names the client's role.
    pub(crate) async fn accept(&self, stream: TcpStream) -> std::io::Result<(MetadataStream, Role)> {
        let tls = tokio::time::timeout(HANDSHAKE_TIMEOUT, self.acceptor.accept(stream))
            .await
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
        let role = self
            .role_of(tls.get_ref().1.peer_certificates())
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::PermissionDenied, "no role of this trust domain"))?;
        Ok((MetadataStream::Server(Box::new(tls)), role))
    }

    /// Completes the client side of a handshake with the metadata node at `addr`.
    pub(crate) async fn connect(&self, stream: TcpStream, addr: &str) -> std::io::Result<MetadataStream> {
        let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host).trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let tls = tokio::time::timeout(HANDSHAKE_TIMEOUT, self.connector.connect(name, stream))
            .await
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
        match self.role_of(tls.get_ref().1.peer_certificates()) {
            Some(Role::Peer(_)) => Ok(MetadataStream::Client(Box::new(tls))),
            _ => {
                Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, format!("{addr} is not a metadata node")))
            }
        }
    }
}

/// Checks a server certificate's chain to the cluster CA, its validity and its serverAuth usage,
/// but not the name dialled: agents' certificates name no address (their role is checked after
/// the handshake, [`dial_agent`]).
#[derive(Debug)]
struct ChainOnly(Arc<rustls::client::WebPkiServerVerifier>);

impl rustls::client::danger::ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        // webpki checks the name last, after the chain, validity and usage.
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName | rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(rustls::client::danger::ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// Dials another agent's peer listener at `addr`: with TLS installed, mutual TLS whose server
/// must be of role agent; else plaintext (as the metadata port is then).
pub async fn dial_agent(addr: &str, timeout: Duration) -> std::io::Result<MetadataStream> {
    let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    let _ = stream.set_nodelay(true);
    let Some(tls) = installed() else { return Ok(MetadataStream::Plain(stream)) };
    // Any name: the verifier checks the chain only, and the role is checked below.
    let name =
        ServerName::try_from("floe-agent").map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let stream = tokio::time::timeout(timeout.min(HANDSHAKE_TIMEOUT), tls.agent_connector.connect(name, stream))
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    match tls.role_of(stream.get_ref().1.peer_certificates()) {
        Some(Role::Agent(_)) => Ok(MetadataStream::Client(Box::new(stream))),
        _ => Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, format!("{addr} is not an agent"))),
    }
}

/// Accepts a connection to this agent's peer listener: with TLS installed, only another agent of
/// the trust domain gets through the handshake; else plaintext.
pub async fn accept_agent(stream: TcpStream) -> std::io::Result<MetadataStream> {
    let _ = stream.set_nodelay(true);
    let Some(tls) = installed() else { return Ok(MetadataStream::Plain(stream)) };
    match tls.accept(stream).await? {
        (stream, Role::Agent(_)) => Ok(stream),
        (_, role) => {
            Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, format!("{role:?} is not an agent")))
        }
    }
}

/// The trust domain and role in a certificate's `spiffe://DOMAIN/floe/ROLE/ID` URI SAN.
fn identity(cert: &CertificateDer<'_>) -> Option<(String, Role)> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let names = parsed.subject_alternative_name().ok()??;
    names.value.general_names.iter().find_map(|name| match name {
        x509_parser::extensions::GeneralName::URI(uri) => parse_spiffe(uri),
        _ => None,
    })
}

fn parse_spiffe(uri: &str) -> Option<(String, Role)> {
    let rest = uri.strip_prefix("spiffe://")?;
    let (domain, path) = rest.split_once('/')?;
    let mut parts = path.split('/');
    let (floe, kind, id) = (parts.next()?, parts.next()?, parts.next()?);
    if floe != "floe" || parts.next().is_some() || domain.is_empty() || id.is_empty() {
        return None;
    }
    let role = match kind {
        "peer" => Role::Peer(id.parse().ok()?),
        "agent" => Role::Agent(id.parse().ok()?),
        "operator" => Role::Operator(id.to_owned()),
        _ => return None,
    };
    Some((domain.to_owned(), role))
}

/// A metadata-protocol (or agent-to-agent) connection: plaintext (no TLS installed) or either
/// side of mutual TLS.
pub enum MetadataStream {
    Plain(TcpStream),
    Client(Box<tokio_rustls::client::TlsStream<TcpStream>>),
    Server(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl std::fmt::Debug for MetadataStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Plain(_) => "MetadataStream::Plain",
            Self::Client(_) => "MetadataStream::Client",
            Self::Server(_) => "MetadataStream::Server",
        })
    }
}

/// Dials the metadata node at `addr`, with TLS when it is installed.
pub(crate) async fn dial(addr: &str, timeout: Duration) -> std::io::Result<MetadataStream> {
    let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    let _ = stream.set_nodelay(true);
    match installed() {
        Some(tls) => tls.connect(stream, addr).await,
        None => Ok(MetadataStream::Plain(stream)),
    }
}

impl AsyncRead for MetadataStream {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => std::pin::Pin::new(s).poll_read(cx, buf),
            Self::Client(s) => std::pin::Pin::new(s.as_mut()).poll_read(cx, buf),
            Self::Server(s) => std::pin::Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for MetadataStream {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => std::pin::Pin::new(s).poll_write(cx, buf),
            Self::Client(s) => std::pin::Pin::new(s.as_mut()).poll_write(cx, buf),
            Self::Server(s) => std::pin::Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => std::pin::Pin::new(s).poll_flush(cx),
            Self::Client(s) => std::pin::Pin::new(s.as_mut()).poll_flush(cx),
            Self::Server(s) => std::pin::Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => std::pin::Pin::new(s).poll_shutdown(cx),
            Self::Client(s) => std::pin::Pin::new(s.as_mut()).poll_shutdown(cx),
            Self::Server(s) => std::pin::Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spiffe_uris_name_roles_and_nothing_else_does() {
        let domain = |d: &str| d.to_owned();
        assert_eq!(parse_spiffe("spiffe://prod/floe/peer/3"), Some((domain("prod"), Role::Peer(3))));
        assert_eq!(parse_spiffe("spiffe://prod/floe/agent/12"), Some((domain("prod"), Role::Agent(12))));
        assert_eq!(
            parse_spiffe("spiffe://prod/floe/operator/alice"),
            Some((domain("prod"), Role::Operator("alice".into())))
        );
        for bad in [
            "https://prod/floe/peer/3",
            "spiffe://prod/floe/peer/x",
            "spiffe://prod/floe/admin/1",
            "spiffe://prod/other/peer/1",
            "spiffe:///floe/peer/1",
            "spiffe://prod/floe/peer/1/extra",
            "spiffe://prod/floe/operator/",
        ] {
            assert_eq!(parse_spiffe(bad), None, "{bad}");
        }
    }
}
