//! One connection to one broker: TCP or TLS, ApiVersions, SASL, then requests one at a time.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use floe_metadata::ScramMechanism;
use kafka_protocol::messages::{
    ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader, SaslAuthenticateRequest,
    SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls;

use crate::ClientError;

/// Time to open a connection, TLS and SASL included.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest response accepted: a fetch asks for at most 64 MiB.
pub(crate) const RESPONSE_BYTES_MAX: usize = 128 * 1024 * 1024;

/// How to reach and authenticate to a source cluster.
#[derive(Clone, Debug)]
pub struct SourceConfig {
    pub bootstrap: Vec<String>,
    /// `Some`: TLS, verified against this PEM bundle, or the system's roots when it is empty.
    pub tls_ca_pem: Option<String>,
    pub sasl: Option<Sasl>,
    pub client_id: String,
}

/// SASL credentials.
#[derive(Clone)]
pub struct Sasl {
    /// `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    pub mechanism: String,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Sasl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sasl").field("mechanism", &self.mechanism).field("username", &self.username).finish()
    }
}

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// A connection to one broker, ready for requests.
pub struct BrokerConnection {
    addr: String,
    stream: Box<dyn Stream>,
    client_id: String,
    correlation: i32,
    /// The broker's version range per API key.
    versions: BTreeMap<i16, (i16, i16)>,
}

impl std::fmt::Debug for BrokerConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerConnection").field("addr", &self.addr).finish_non_exhaustive()
    }
}

fn tls_config(addr: &str, ca_pem: &str) -> Result<Arc<rustls::ClientConfig>, ClientError> {
    use tokio_rustls::rustls::pki_types::CertificateDer;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    let tls = |reason: String| ClientError::Tls { addr: addr.to_owned(), reason };
    let mut roots = rustls::RootCertStore::empty();
    if ca_pem.trim().is_empty() {
        let found = rustls_native_certs::load_native_certs();
        for cert in found.certs {
            // A system root this TLS library cannot use is skipped, as browsers do.
            let _ = roots.add(cert);
        }
    } else {
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            let cert = cert.map_err(|e| tls(format!("the CA bundle: {e}")))?;
            roots.add(cert).map_err(|e| tls(format!("the CA bundle: {e}")))?;
        }
    }
    if roots.is_empty() {
        return Err(tls("no trusted CA certificates".into()));
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

impl BrokerConnection {
    /// Connects, negotiates versions and authenticates.
    pub async fn connect(addr: &str, config: &SourceConfig) -> Result<Self, ClientError> {
        let seconds = CONNECT_TIMEOUT.as_secs();
        tokio::time::timeout(CONNECT_TIMEOUT, Self::open(addr, config))
            .await
            .map_err(|_| ClientError::Timeout { addr: addr.to_owned(), seconds })?
    }

    async fn open(addr: &str, config: &SourceConfig) -> Result<Self, ClientError> {
        let tcp =
            TcpStream::connect(addr).await.map_err(|source| ClientError::Connect { addr: addr.to_owned(), source })?;
        let _ = tcp.set_nodelay(true);
        let stream: Box<dyn Stream> = match &config.tls_ca_pem {
            None => Box::new(tcp),
            Some(ca_pem) => {
                let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h).trim_matches(['[', ']']);
                let name = rustls::pki_types::ServerName::try_from(host.to_owned())
                    .map_err(|e| ClientError::Tls { addr: addr.to_owned(), reason: e.to_string() })?;
                let connector = tokio_rustls::TlsConnector::from(tls_config(addr, ca_pem)?);
                let tls = connector
                    .connect(name, tcp)
                    .await
                    .map_err(|e| ClientError::Tls { addr: addr.to_owned(), reason: e.to_string() })?;
                Box::new(tls)
            }
        };
        let mut connection = Self {
            addr: addr.to_owned(),
            stream,
            client_id: config.client_id.clone(),
            correlation: 0,
            versions: BTreeMap::new(),
        };
        connection.negotiate().await?;
        if let Some(sasl) = &config.sasl {
            connection.authenticate(sasl).await?;
        }
        Ok(connection)
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The version of `R` to use: the highest both sides speak, at most `highest`.
    pub fn version<R: Request>(&self, api: &'static str, highest: i16) -> Result<i16, ClientError> {
        let unsupported = || ClientError::Unsupported { addr: self.addr.clone(), api };
        let (min, max) = self.versions.get(&R::KEY).copied().ok_or_else(unsupported)?;
        let version = max.min(highest).min(R::VERSIONS.max);
        if version < min.max(R::VERSIONS.min) {
            return Err(unsupported());
        }
        Ok(version)
    }

    /// ApiVersions v3; a broker that does not speak it answers in v0 with its ranges.
    async fn negotiate(&mut self) -> Result<(), ClientError> {
        let mut request = ApiVersionsRequest::default();
        request.client_software_name = StrBytes::from_static_str("floe-link");
        request.client_software_version = StrBytes::from_static_str(env!("CARGO_PKG_VERSION"));
        let body = self.exchange::<ApiVersionsRequest>(&request, 3).await?;
        let decode = |mut body: Bytes, version| ApiVersionsResponse::decode(&mut body, version);
        let response = match decode(body.clone(), 3) {
            Ok(r) if r.error_code == 0 => r,
            _ => decode(body, 0).map_err(|e| self.malformed("ApiVersions", e))?,
        };
        if response.error_code != 0 && response.api_keys.is_empty() {
            return Err(ClientError::Kafka { api: "ApiVersions", code: response.error_code, message: None });
        }
        self.versions = response.api_keys.iter().map(|k| (k.api_key, (k.min_version, k.max_version))).collect();
        Ok(())
    }

    async fn authenticate(&mut self, sasl: &Sasl) -> Result<(), ClientError> {
        let refused = |addr: &str, reason: String| ClientError::Authentication { addr: addr.to_owned(), reason };
        let mut handshake = SaslHandshakeRequest::default();
        handshake.mechanism = StrBytes::from_string(sasl.mechanism.clone());
        let answer = self.call(&handshake, 1).await?;
        if answer.error_code != 0 {
            let offered: Vec<&str> = answer.mechanisms.iter().map(|m| m.as_str()).collect();
            return Err(refused(
                &self.addr,
                format!("mechanism {} not enabled (offered: {offered:?})", sasl.mechanism),
            ));
        }
        let version = self.version::<SaslAuthenticateRequest>("SaslAuthenticate", 2)?;
        match sasl.mechanism.as_str() {
            "PLAIN" => {
                let token = format!("\0{}\0{}", sasl.username, sasl.password);
                self.sasl_step(Bytes::from(token.into_bytes()), version).await?;
            }
            "SCRAM-SHA-256" | "SCRAM-SHA-512" => {
                let mechanism =
                    if sasl.mechanism == "SCRAM-SHA-256" { ScramMechanism::Sha256 } else { ScramMechanism::Sha512 };
                let (mut scram, first) =
                    floe_auth::scram::ScramClient::start(mechanism, &sasl.username, &sasl.password)
                        .map_err(|e| refused(&self.addr, e.to_string()))?;
                let server_first = self.sasl_step(Bytes::from(first), version).await?;
                let last = scram.server_first(&server_first).map_err(|e| refused(&self.addr, e.to_string()))?;
                let server_final = self.sasl_step(Bytes::from(last), version).await?;
                scram.server_final(&server_final).map_err(|e| refused(&self.addr, e.to_string()))?;
            }
            other => return Err(refused(&self.addr, format!("unknown SASL mechanism {other}"))),
        }
        Ok(())
    }

    async fn sasl_step(&mut self, token: Bytes, version: i16) -> Result<Bytes, ClientError> {
        let mut request = SaslAuthenticateRequest::default();
        request.auth_bytes = token;
        let answer = self.call(&request, version).await?;
        if answer.error_code != 0 {
            let reason = answer.error_message.map_or_else(|| format!("error {}", answer.error_code), |m| m.to_string());
            return Err(ClientError::Authentication { addr: self.addr.clone(), reason });
        }
        Ok(answer.auth_bytes)
    }

    fn malformed(&self, api: &'static str, e: impl std::fmt::Display) -> ClientError {
        ClientError::Malformed { addr: self.addr.clone(), api, reason: e.to_string() }
    }

    /// Sends `request` at `version` and decodes the answer.
    pub async fn call<R: Request>(&mut self, request: &R, version: i16) -> Result<R::Response, ClientError> {
        let api = api_name(R::KEY);
        let mut body = self.exchange(request, version).await?;
        R::Response::decode(&mut body, version).map_err(|e| self.malformed(api, e))
    }

    /// Sends `request` and returns the response body after its header.
    async fn exchange<R: Request>(&mut self, request: &R, version: i16) -> Result<Bytes, ClientError> {
        let api = api_name(R::KEY);
        self.correlation = self.correlation.wrapping_add(1);
        let mut header = RequestHeader::default();
        header.request_api_key = R::KEY;
        header.request_api_version = version;
        header.correlation_id = self.correlation;
        header.client_id = Some(StrBytes::from_string(self.client_id.clone()));
        let mut frame = BytesMut::new();
        frame.put_i32(0);
        header.encode(&mut frame, R::header_version(version)).map_err(|e| self.malformed(api, e))?;
        request.encode(&mut frame, version).map_err(|e| self.malformed(api, e))?;
        let len = i32::try_from(frame.len() - 4).map_err(|e| self.malformed(api, e))?;
        frame[..4].copy_from_slice(&len.to_be_bytes());
        let io = |addr: &str, source| ClientError::Io { addr: addr.to_owned(), source };
        self.stream.write_all(&frame).await.map_err(|e| io(&self.addr, e))?;
        self.stream.flush().await.map_err(|e| io(&self.addr, e))?;
        let size = self.stream.read_i32().await.map_err(|e| io(&self.addr, e))?;
        let size = usize::try_from(size).ok().filter(|s| (4..=RESPONSE_BYTES_MAX).contains(s));
        let size = size.ok_or_else(|| self.malformed(api, "response size out of range"))?;
        let mut body = vec![0u8; size];
        self.stream.read_exact(&mut body).await.map_err(|e| io(&self.addr, e))?;
        let mut body = Bytes::from(body);
        let header_version = <R::Response as HeaderVersion>::header_version(version);
        let header = ResponseHeader::decode(&mut body, header_version).map_err(|e| self.malformed(api, e))?;
        if header.correlation_id != self.correlation {
            return Err(self.malformed(api, "the correlation id does not match the request"));
        }
        if body.remaining() == 0 && R::KEY != ApiVersionsRequest::KEY {
            return Err(self.malformed(api, "empty response"));
        }
        Ok(body)
    }
}

pub(crate) fn api_name(key: i16) -> &'static str {
    match key {
        0 => "Produce",
        1 => "Fetch",
        2 => "ListOffsets",
        3 => "Metadata",
        9 => "OffsetFetch",
        16 => "ListGroups",
        17 => "SaslHandshake",
        18 => "ApiVersions",
        32 => "DescribeConfigs",
        36 => "SaslAuthenticate",
        _ => "a request",
    }
}
