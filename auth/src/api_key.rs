//! HTTP API keys: `fk_<id>.<secret>`. The id names the key in metadata; only the SHA-256 of the
//! 256-bit random secret is stored (a slow hash adds nothing to a secret that cannot be guessed).

use aws_lc_rs::{constant_time, digest, rand};

use crate::AuthError;

const PREFIX: &str = "fk_";
const ID_BYTES: usize = 8;
const SECRET_BYTES: usize = 32;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A new key: its id and the whole token the client presents (shown once).
pub fn generate() -> Result<(String, String), AuthError> {
    let mut id = [0u8; ID_BYTES];
    let mut secret = [0u8; SECRET_BYTES];
    rand::fill(&mut id).map_err(|_| AuthError::Malformed("no randomness available"))?;
    rand::fill(&mut secret).map_err(|_| AuthError::Malformed("no randomness available"))?;
    let id = hex(&id);
    Ok((id.clone(), join(&id, &hex(&secret))))
}

/// The token a client presents for key `id` with `secret` (what [`split`] takes apart).
pub fn join(id: &str, secret: &str) -> String {
    format!("{PREFIX}{id}.{secret}")
}

/// The key id and secret of a token.
pub fn split(token: &str) -> Result<(&str, &str), AuthError> {
    token
        .strip_prefix(PREFIX)
        .and_then(|rest| rest.split_once('.'))
        .filter(|(id, secret)| !id.is_empty() && !secret.is_empty() && id.len() <= 64 && secret.len() <= 128)
        .ok_or(AuthError::Malformed("an API key looks like fk_<id>.<secret>"))
}

pub fn secret_hash(secret: &str) -> Vec<u8> {
    digest::digest(&digest::SHA256, secret.as_bytes()).as_ref().to_vec()
}

/// Whether `secret` hashes to `stored`, in constant time.
pub fn secret_matches(secret: &str, stored: &[u8]) -> bool {
    constant_time::verify_slices_are_equal(&secret_hash(secret), stored).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_token_splits_into_its_id_and_a_secret_matching_its_hash() {
        let (id, token) = generate().expect("random");
        let (got_id, secret) = split(&token).expect("splits");
        assert_eq!(got_id, id);
        let stored = secret_hash(secret);
        assert!(secret_matches(secret, &stored));
        assert!(!secret_matches("other", &stored));
        assert!(split("Bearer x").is_err() && split("fk_abc").is_err() && split("fk_.x").is_err());
    }
}
