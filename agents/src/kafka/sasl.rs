//! SASL on the Kafka listener: SaslHandshake (v1) names a mechanism, then SaslAuthenticate
//! carries its messages (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512). Until a connection has
//! authenticated only ApiVersions and these two are served; with a session lifetime
//! (`connections.max.reauth.ms`, KIP-368) a client must authenticate again, as the same user,
//! before it runs out, or the connection is closed at its next request.

use std::time::{Duration, Instant};

use bytes::Bytes;
use floe_auth::AuthError;
use floe_auth::scram::{ScramServer, decoy_salt};
use floe_metadata::{Namespace, ScramMechanism, State};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

/// A SASL mechanism the listener offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    Scram(ScramMechanism),
}

impl Mechanism {
    pub const ALL: [Self; 3] = [Self::Plain, Self::Scram(ScramMechanism::Sha256), Self::Scram(ScramMechanism::Sha512)];

    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::Scram(m) => m.name(),
        }
    }
}

impl std::str::FromStr for Mechanism {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown SASL mechanism {s:?}; known: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"))
    }
}

/// SASL on the Kafka listener.
#[derive(Clone, Debug)]
pub struct SaslConfig {
    pub mechanisms: Vec<Mechanism>,
    /// How long an authentication lasts; `None`: for the connection's life.
    pub session_lifetime: Option<Duration>,
    /// How long a failed authentication waits before its answer (and the connection's close),
    /// which slows down password guessing.
    pub failure_delay: Duration,
}

/// Who a connection authenticated as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    pub user: String,
    pub tenant: String,
    /// The tenant's namespace as it was at authentication: a tenant created again under the
    /// same name has another, so a re-authentication then fails.
    pub namespace: Namespace,
}

#[derive(Debug)]
enum Step {
    /// No mechanism chosen yet (or the last exchange finished).
    Idle,
    Chosen(Mechanism),
    Scram(Box<ScramServer>),
}

/// One connection's authentication.
#[derive(Debug)]
pub(super) struct Session {
    config: SaslConfig,
    step: Step,
    principal: Option<Principal>,
    /// What the principal was when it authenticated: its tenant's creation time and its
    /// credentials' salts. Once the state no longer matches (the user, its tenant or its
    /// password went; a tenant of the same name was created again), the session is over.
    incarnation: Option<(i64, Vec<Vec<u8>>)>,
    expires: Option<Instant>,
}

/// What the connection does after a SASL request.
pub(super) enum Verdict {
    Continue,
    /// Answer, then close: authentication failed.
    Close,
}

/// What the connection may do with a request that is not part of SASL.
pub(super) enum Admission {
    Serve,
    /// Not authenticated (or the session ran out): close without answering, as Kafka does.
    Refuse(&'static str),
}

impl Session {
    pub(super) fn new(config: SaslConfig) -> Self {
        Self { config, step: Step::Idle, principal: None, incarnation: None, expires: None }
    }

    pub(super) fn admit(&self, api_key: ApiKey, state: &State) -> Admission {
        if matches!(api_key, ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate) {
            return Admission::Serve;
        }
        match (&self.principal, self.expires) {
            (None, _) => Admission::Refuse("request before SASL authentication"),
            (Some(_), Some(expires)) if Instant::now() >= expires => {
                Admission::Refuse("SASL session expired without re-authentication")
            }
            (Some(principal), _) if incarnation(principal, state) != self.incarnation => {
                Admission::Refuse("the user, its password or its tenant changed since it authenticated")
            }
            (Some(_), _) => Admission::Serve,
        }
    }

    pub(super) fn handshake(&mut self, request: &SaslHandshakeRequest) -> SaslHandshakeResponse {
        let offered: Vec<StrBytes> =
            self.config.mechanisms.iter().map(|m| StrBytes::from_static_str(m.name())).collect();
        let chosen = self.config.mechanisms.iter().copied().find(|m| m.name() == request.mechanism.as_str());
        let response = SaslHandshakeResponse::default().with_mechanisms(offered);
        match chosen {
            Some(m) => {
                self.step = Step::Chosen(m);
                response
            }
            None => response.with_error_code(ResponseError::UnsupportedSaslMechanism.code()),
        }
    }

    /// One SaslAuthenticate message, checked against the credentials in `state`.
    pub(super) fn authenticate(
        &mut self,
        request: &SaslAuthenticateRequest,
        state: &State,
        peer: std::net::SocketAddr,
    ) -> (SaslAuthenticateResponse, Verdict) {
        let step = std::mem::replace(&mut self.step, Step::Idle);
        let outcome = match step {
            Step::Idle => Err(AuthError::Malformed("SaslAuthenticate before SaslHandshake")),
            Step::Chosen(Mechanism::Plain) => plain(&request.auth_bytes, state).map(|user| (Some(user), Bytes::new())),
            Step::Chosen(Mechanism::Scram(m)) => {
                let mut server = ScramServer::new(m);
                let first = server.client_first(
                    &request.auth_bytes,
                    |user| state.users.get(user).and_then(|u| u.scram.get(&m)).cloned(),
                    |user| decoy_salt(&state.scram_decoy_key, user),
                );
                first.map(|answer| {
                    self.step = Step::Scram(Box::new(server));
                    (None, Bytes::from(answer))
                })
            }
            Step::Scram(mut server) => {
                server.client_final(&request.auth_bytes).map(|(user, answer)| (Some(user), Bytes::from(answer)))
            }
        };
        match outcome {
            Ok((None, answer)) => (SaslAuthenticateResponse::default().with_auth_bytes(answer), Verdict::Continue),
            Ok((Some(user), answer)) => match self.authenticated(user, state) {
                Ok(lifetime_ms) => (
                    SaslAuthenticateResponse::default().with_auth_bytes(answer).with_session_lifetime_ms(lifetime_ms),
                    Verdict::Continue,
                ),
                Err(e) => self.refuse(&e, peer),
            },
            Err(e) => self.refuse(&e, peer),
        }
    }

    /// Records the principal; a re-authentication must be the same user.
    fn authenticated(&mut self, user: String, state: &State) -> Result<i64, AuthError> {
        let tenant = state.users.get(&user).map(|u| u.tenant.clone()).ok_or(AuthError::Failed)?;
        let namespace = state.tenant_namespace(&tenant).ok_or(AuthError::Failed)?;
        let principal = Principal { user, tenant, namespace };
        if self.principal.as_ref().is_some_and(|p| *p != principal) {
            return Err(AuthError::Failed);
        }
        crate::metrics::AUTHENTICATIONS.with_label_values(&["ok"]).inc();
        self.incarnation = incarnation(&principal, state);
        self.principal = Some(principal);
        self.expires = self.config.session_lifetime.map(|l| Instant::now() + l);
        Ok(self.config.session_lifetime.map_or(0, |l| l.as_millis() as i64))
    }

    /// Answers a failed (or refused) authentication; the connection closes after it.
    pub(super) fn refuse(
        &mut self,
        error: &AuthError,
        peer: std::net::SocketAddr,
    ) -> (SaslAuthenticateResponse, Verdict) {
        crate::metrics::AUTHENTICATIONS.with_label_values(&["failed"]).inc();
        // Logged without saying whether the user exists or the password was wrong.
        crate::log_limited!(tracing::Level::INFO, %peer, error = %error, "SASL authentication failed");
        let response = SaslAuthenticateResponse::default()
            .with_error_code(ResponseError::SaslAuthenticationFailed.code())
            .with_error_message(Some(StrBytes::from_string(error.to_string())));
        (response, Verdict::Close)
    }

    /// Whether a SCRAM exchange is half-way: the server-first message went out, the client's
    /// final one has not come.
    pub(super) fn exchange_pending(&self) -> bool {
        matches!(self.step, Step::Scram(_))
    }

    /// Who this connection authenticated as, once it has.
    pub(super) fn principal(&self) -> Option<&Principal> {
        self.principal.as_ref()
    }

    pub(super) fn failure_delay(&self) -> Duration {
        self.config.failure_delay
    }
}

/// What identifies this incarnation of `principal` in `state`, if it still exists there.
fn incarnation(principal: &Principal, state: &State) -> Option<(i64, Vec<Vec<u8>>)> {
    let user = state.users.get(&principal.user).filter(|u| u.tenant == principal.tenant)?;
    let tenant =
        state.tenants.get(&principal.tenant).filter(|t| t.namespace(&principal.tenant) == principal.namespace)?;
    Some((tenant.created_ms, user.scram.values().map(|c| c.salt.clone()).collect()))
}

/// The user of a PLAIN message whose password matches the user's SCRAM credential.
fn plain(message: &[u8], state: &State) -> Result<String, AuthError> {
    let (user, password) = floe_auth::plain::parse(message)?;
    let known = state.users.get(&user).and_then(|u| u.scram.iter().next());
    // An unknown user is checked against a made-up credential: the same PBKDF2 work, the same
    // answer, so timing does not tell who exists.
    let decoy;
    let (mechanism, credential) = match known {
        Some((m, c)) => (*m, c),
        None => {
            decoy = floe_metadata::ScramCredential {
                salt: decoy_salt(&state.scram_decoy_key, &user),
                iterations: floe_auth::scram::DEFAULT_ITERATIONS,
                stored_key: vec![0; 32],
                server_key: vec![0; 32],
            };
            (ScramMechanism::Sha256, &decoy)
        }
    };
    let matches = floe_auth::scram::password_matches(mechanism, &password, credential);
    if known.is_some() && matches { Ok(user) } else { Err(AuthError::Failed) }
}
