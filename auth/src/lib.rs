//! Authentication without I/O: the server side of SASL/SCRAM (RFC 5802, RFC 7677) and
//! SASL/PLAIN (RFC 4616) exchanges, deriving stored SCRAM credentials from passwords, and HTTP
//! API keys, and per-source limiting of failed attempts. Credentials come from the metadata
//! state; nothing here stores anything.

pub mod api_key;
pub mod failures;
pub mod plain;
pub mod scram;

/// Why authentication failed. What a client is told is deliberately the same for an unknown
/// user and a wrong password; `Malformed` covers exchanges that break the protocol.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("authentication failed: invalid username or password")]
    Failed,
    #[error("malformed authentication message: {0}")]
    Malformed(&'static str),
    #[error("too many failed authentications from this address; retry in {0} s")]
    TooManyFailures(u64),
    /// The credentials were right, but a limit keeps the connection out.
    #[error("authenticated, but refused: {0}")]
    OverLimit(String),
}
