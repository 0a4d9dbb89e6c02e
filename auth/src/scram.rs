//! SCRAM-SHA-256 and SCRAM-SHA-512 as Kafka clients speak them: no channel binding (`n,,`),
//! optional extensions in the client-first message (ignored), no authzid other than the user
//! itself. The server side for Floe's listeners, the client side for links to other clusters.

use aws_lc_rs::{constant_time, digest, hmac, pbkdf2, rand};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use floe_metadata::{ScramCredential, ScramMechanism};

use crate::AuthError;

/// Bytes of random salt in a new credential.
const SALT_BYTES: usize = 16;
/// Bytes of server nonce (before base64).
const NONCE_BYTES: usize = 18;
/// Longest SCRAM message accepted.
pub const MESSAGE_BYTES_MAX: usize = 4096;

fn hmac_algorithm(m: ScramMechanism) -> hmac::Algorithm {
    match m {
        ScramMechanism::Sha256 => hmac::HMAC_SHA256,
        ScramMechanism::Sha512 => hmac::HMAC_SHA512,
    }
}

fn digest_algorithm(m: ScramMechanism) -> &'static digest::Algorithm {
    match m {
        ScramMechanism::Sha256 => &digest::SHA256,
        ScramMechanism::Sha512 => &digest::SHA512,
    }
}

fn hmac(m: ScramMechanism, key: &[u8], data: &[u8]) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac_algorithm(m), key), data).as_ref().to_vec()
}

/// The salted password: PBKDF2 with the mechanism's HMAC.
fn salted_password(m: ScramMechanism, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
    let algorithm = match m {
        ScramMechanism::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
        ScramMechanism::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
    };
    let mut out = vec![0; m.hash_bytes()];
    let iterations = std::num::NonZeroU32::new(iterations.max(1)).unwrap_or(std::num::NonZeroU32::MIN);
    pbkdf2::derive(algorithm, iterations, salt, password.as_bytes(), &mut out);
    out
}

/// The credential a server keeps for `password` with a given salt.
pub fn derive_credential(m: ScramMechanism, password: &str, salt: &[u8], iterations: u32) -> ScramCredential {
    credential_from_salted(m, &salted_password(m, password, salt, iterations), salt, iterations)
}

/// The credential a server keeps, from the salted password (`Hi(password, salt, iterations)`),
/// which is what Kafka's AlterUserScramCredentials carries instead of the password.
pub fn credential_from_salted(m: ScramMechanism, salted: &[u8], salt: &[u8], iterations: u32) -> ScramCredential {
    let client_key = hmac(m, salted, b"Client Key");
    ScramCredential {
        salt: salt.to_vec(),
        iterations,
        stored_key: digest::digest(digest_algorithm(m), &client_key).as_ref().to_vec(),
        server_key: hmac(m, salted, b"Server Key"),
    }
}

/// A credential for `password` with a fresh random salt.
pub fn new_credential(m: ScramMechanism, password: &str, iterations: u32) -> Result<ScramCredential, AuthError> {
    let mut salt = [0u8; SALT_BYTES];
    rand::fill(&mut salt).map_err(|_| AuthError::Malformed("no randomness available"))?;
    Ok(derive_credential(m, password, &salt, iterations))
}

/// Iterations of new credentials (and of decoys, which must look the same).
pub const DEFAULT_ITERATIONS: u32 = 8192;

/// A salt for a user that does not exist: the same for the same name (asking twice must not
/// reveal it was made up), the length of a real one, and unpredictable without `key`, the
/// cluster's secret decoy key.
pub fn decoy_salt(key: &[u8], user: &str) -> Vec<u8> {
    hmac(ScramMechanism::Sha256, key, user.as_bytes())[..SALT_BYTES].to_vec()
}

/// Whether `password` matches `credential` (for SASL/PLAIN), in constant time.
pub fn password_matches(m: ScramMechanism, password: &str, credential: &ScramCredential) -> bool {
    let derived = derive_credential(m, password, &credential.salt, credential.iterations);
    constant_time::verify_slices_are_equal(&derived.stored_key, &credential.stored_key).is_ok()
}

/// Where a server exchange is.
#[derive(Debug)]
enum Step {
    /// Waiting for the client-first message.
    First,
    /// Sent server-first; waiting for client-final.
    Final {
        user: String,
        credential: ScramCredential,
        known: bool,
        client_first_bare: String,
        server_first: String,
        nonce: String,
    },
    Done,
}

/// One server-side SCRAM exchange.
#[derive(Debug)]
pub struct ScramServer {
    mechanism: ScramMechanism,
    step: Step,
    /// Fixed in tests; random otherwise.
    server_nonce: Option<String>,
}

/// SCRAM's `saslname`: `=2C` stands for `,` and `=3D` for `=`.
fn decode_name(raw: &str) -> Result<String, AuthError> {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        match rest.get(at..at + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(AuthError::Malformed("bad escape in user name")),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

fn attribute(message: &str, name: char) -> Option<&str> {
    message.split(',').find_map(|part| {
        let mut chars = part.chars();
        (chars.next() == Some(name) && chars.next() == Some('=')).then(|| &part[2..])
    })
}

impl ScramServer {
    pub fn new(mechanism: ScramMechanism) -> Self {
        Self { mechanism, step: Step::First, server_nonce: None }
    }

    #[cfg(test)]
    fn with_nonce(mechanism: ScramMechanism, nonce: &str) -> Self {
        Self { mechanism, step: Step::First, server_nonce: Some(nonce.to_owned()) }
    }

    /// Takes the client-first message and answers with server-first. `lookup` finds the user's
    /// credential for this mechanism; an unknown user is carried through to the last step
    /// with a made-up credential, so the exchange does not tell who exists. `decoy_salt` seeds
    /// that made-up credential (the same user always gets the same salt).
    pub fn client_first(
        &mut self,
        message: &[u8],
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
        decoy_salt: impl FnOnce(&str) -> Vec<u8>,
    ) -> Result<Vec<u8>, AuthError> {
        if !matches!(self.step, Step::First) {
            return Err(AuthError::Malformed("client-first message out of order"));
        }
        let message = std::str::from_utf8(message).map_err(|_| AuthError::Malformed("not UTF-8"))?;
        if message.len() > MESSAGE_BYTES_MAX {
            return Err(AuthError::Malformed("message too long"));
        }
        // gs2-header: "n," or "y," (no channel binding), then an optional authzid, then ','.
        let (flag, rest) = message.split_once(',').ok_or(AuthError::Malformed("no gs2 header"))?;
        if flag != "n" && flag != "y" {
            return Err(AuthError::Malformed("channel binding is not supported"));
        }
        let (authzid, bare) = rest.split_once(',').ok_or(AuthError::Malformed("no gs2 header"))?;
        if bare.starts_with("m=") {
            return Err(AuthError::Malformed("mandatory extensions are not supported"));
        }
        let user = decode_name(attribute(bare, 'n').ok_or(AuthError::Malformed("no user name"))?)?;
        let authzid = authzid.strip_prefix("a=").map(decode_name).transpose()?;
        if authzid.is_some_and(|a| a != user) {
            return Err(AuthError::Failed);
        }
        let client_nonce = attribute(bare, 'r').filter(|n| !n.is_empty()).ok_or(AuthError::Malformed("no nonce"))?;
        let server_nonce = match self.server_nonce.take() {
            Some(n) => n,
            None => {
                let mut raw = [0u8; NONCE_BYTES];
                rand::fill(&mut raw).map_err(|_| AuthError::Malformed("no randomness available"))?;
                B64.encode(raw)
            }
        };
        let nonce = format!("{client_nonce}{server_nonce}");
        let (credential, known) = match lookup(&user) {
            Some(c) => (c, true),
            None => {
                let bytes = self.mechanism.hash_bytes();
                let decoy = ScramCredential {
                    salt: decoy_salt(&user),
                    iterations: DEFAULT_ITERATIONS,
                    stored_key: vec![0; bytes],
                    server_key: vec![0; bytes],
                };
                (decoy, false)
            }
        };
        let server_first = format!("r={nonce},s={},i={}", B64.encode(&credential.salt), credential.iterations);
        let answer = server_first.clone().into_bytes();
        self.step = Step::Final { user, credential, known, client_first_bare: bare.to_owned(), server_first, nonce };
        Ok(answer)
    }

    /// Takes the client-final message; on success returns the user and server-final message.
    pub fn client_final(&mut self, message: &[u8]) -> Result<(String, Vec<u8>), AuthError> {
        let Step::Final { user, credential, known, client_first_bare, server_first, nonce } =
            std::mem::replace(&mut self.step, Step::Done)
        else {
            return Err(AuthError::Malformed("client-final message out of order"));
        };
        let message = std::str::from_utf8(message).map_err(|_| AuthError::Malformed("not UTF-8"))?;
        if message.len() > MESSAGE_BYTES_MAX {
            return Err(AuthError::Malformed("message too long"));
        }
        let (without_proof, proof) = message.rsplit_once(",p=").ok_or(AuthError::Malformed("no proof"))?;
        let channel_binding = attribute(without_proof, 'c').ok_or(AuthError::Malformed("no channel binding"))?;
        // base64 of the gs2 header without an authzid ("n,,") or with one.
        let binding = B64.decode(channel_binding).map_err(|_| AuthError::Malformed("channel binding not base64"))?;
        if !(binding.starts_with(b"n,") || binding.starts_with(b"y,")) {
            return Err(AuthError::Malformed("channel binding is not supported"));
        }
        if attribute(without_proof, 'r') != Some(nonce.as_str()) {
            return Err(AuthError::Malformed("nonce mismatch"));
        }
        let proof = B64.decode(proof).map_err(|_| AuthError::Malformed("proof not base64"))?;
        let m = self.mechanism;
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let client_signature = hmac(m, &credential.stored_key, auth_message.as_bytes());
        if proof.len() != client_signature.len() {
            return Err(AuthError::Failed);
        }
        let client_key: Vec<u8> = proof.iter().zip(&client_signature).map(|(a, b)| a ^ b).collect();
        let stored_key = digest::digest(digest_algorithm(m), &client_key);
        let matches = constant_time::verify_slices_are_equal(stored_key.as_ref(), &credential.stored_key).is_ok();
        if !(known && matches) {
            return Err(AuthError::Failed);
        }
        let server_signature = hmac(m, &credential.server_key, auth_message.as_bytes());
        Ok((user, format!("v={}", B64.encode(server_signature)).into_bytes()))
    }
}

/// Most PBKDF2 iterations a server may ask of a client: a hostile server must not make a link
/// spend seconds of CPU per connection.
pub const CLIENT_ITERATIONS_MAX: u32 = 65_536;

/// One client-side SCRAM exchange.
#[derive(Debug)]
pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    client_first_bare: String,
    nonce: String,
    /// The server signature the server-final message must carry, once client-final was sent.
    server_signature: Option<Vec<u8>>,
}

/// SCRAM's `saslname`: `,` as `=2C` and `=` as `=3D`.
fn encode_name(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

impl ScramClient {
    /// Starts an exchange; returns it and the client-first message.
    pub fn start(mechanism: ScramMechanism, user: &str, password: &str) -> Result<(Self, Vec<u8>), AuthError> {
        let mut nonce = [0u8; NONCE_BYTES];
        rand::fill(&mut nonce).map_err(|_| AuthError::Malformed("no randomness available"))?;
        Ok(Self::with_nonce(mechanism, user, password, &B64.encode(nonce)))
    }

    fn with_nonce(mechanism: ScramMechanism, user: &str, password: &str, nonce: &str) -> (Self, Vec<u8>) {
        let client_first_bare = format!("n={},r={nonce}", encode_name(user));
        let first = format!("n,,{client_first_bare}").into_bytes();
        let client = Self {
            mechanism,
            password: password.to_owned(),
            client_first_bare,
            nonce: nonce.to_owned(),
            server_signature: None,
        };
        (client, first)
    }

    /// Takes the server-first message and answers with client-final.
    pub fn server_first(&mut self, message: &[u8]) -> Result<Vec<u8>, AuthError> {
        if self.server_signature.is_some() {
            return Err(AuthError::Malformed("server-first message out of order"));
        }
        let message = std::str::from_utf8(message).map_err(|_| AuthError::Malformed("not UTF-8"))?;
        if message.len() > MESSAGE_BYTES_MAX {
            return Err(AuthError::Malformed("message too long"));
        }
        if attribute(message, 'e').is_some() {
            return Err(AuthError::Failed);
        }
        let nonce = attribute(message, 'r').ok_or(AuthError::Malformed("no nonce"))?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(AuthError::Malformed("the server's nonce does not extend ours"));
        }
        let salt = attribute(message, 's').and_then(|s| B64.decode(s).ok()).ok_or(AuthError::Malformed("no salt"))?;
        let iterations: u32 =
            attribute(message, 'i').and_then(|i| i.parse().ok()).ok_or(AuthError::Malformed("no iteration count"))?;
        if iterations == 0 || iterations > CLIENT_ITERATIONS_MAX {
            return Err(AuthError::Malformed("iteration count out of range"));
        }
        let m = self.mechanism;
        let salted = salted_password(m, &self.password, &salt, iterations);
        let credential = credential_from_salted(m, &salted, &salt, iterations);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{message},{without_proof}", self.client_first_bare);
        let client_key = hmac(m, &salted, b"Client Key");
        let signature = hmac(m, &credential.stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(k, s)| k ^ s).collect();
        self.server_signature = Some(hmac(m, &credential.server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    /// Checks the server-final message: the server proved it knows the credential.
    pub fn server_final(&self, message: &[u8]) -> Result<(), AuthError> {
        let expected =
            self.server_signature.as_ref().ok_or(AuthError::Malformed("server-final message out of order"))?;
        let message = std::str::from_utf8(message).map_err(|_| AuthError::Malformed("not UTF-8"))?;
        if attribute(message, 'e').is_some() {
            return Err(AuthError::Failed);
        }
        let verifier = attribute(message, 'v')
            .and_then(|v| B64.decode(v).ok())
            .ok_or(AuthError::Malformed("no server signature"))?;
        constant_time::verify_slices_are_equal(&verifier, expected)
            .map_err(|_| AuthError::Malformed("the server's signature is wrong"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677's SCRAM-SHA-256 example from the client's side, and against Floe's server with
    /// a name that needs escaping.
    #[test]
    fn client_exchange_matches_rfc_7677_and_floes_server() {
        let (mut client, first) =
            ScramClient::with_nonce(ScramMechanism::Sha256, "user", "pencil", "rOprNGfwEbeRWgbNEkqO");
        assert_eq!(first, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let last = client
            .server_first(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
            .expect("client-final");
        assert_eq!(
            String::from_utf8(last).expect("utf-8"),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        client.server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=").expect("the server is genuine");
        assert!(client.server_final(b"v=AAAA").is_err());

        for (password, ok) in [("s3cret", true), ("wrong", false)] {
            let credential = derive_credential(ScramMechanism::Sha512, "s3cret", b"salt-salt-salt", 4096);
            let (mut client, first) = ScramClient::start(ScramMechanism::Sha512, "a,b=c", password).expect("start");
            let mut server = ScramServer::new(ScramMechanism::Sha512);
            let server_first = server
                .client_first(&first, |u| (u == "a,b=c").then(|| credential.clone()), |_| vec![1])
                .expect("server-first");
            let client_final = client.server_first(&server_first).expect("client-final");
            match server.client_final(&client_final) {
                Ok((user, server_final)) => {
                    assert!(ok && user == "a,b=c");
                    client.server_final(&server_final).expect("verified");
                }
                Err(e) => assert!(!ok, "{e}"),
            }
        }
        let (mut client, _) = ScramClient::start(ScramMechanism::Sha256, "u", "p").expect("start");
        assert!(client.server_first(b"r=someone-else,s=c2FsdA==,i=4096").is_err(), "a nonce not extending ours");
        let (mut client, _) = ScramClient::with_nonce(ScramMechanism::Sha256, "u", "p", "abc");
        assert!(client.server_first(b"r=abcdef,s=c2FsdA==,i=100000000").is_err(), "too many iterations");
    }

    /// RFC 7677's SCRAM-SHA-256 example, end to end.
    #[test]
    fn rfc_7677_exchange() {
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").expect("base64");
        let credential = derive_credential(ScramMechanism::Sha256, "pencil", &salt, 4096);
        let mut server = ScramServer::with_nonce(ScramMechanism::Sha256, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0");
        let first = server
            .client_first(
                b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
                |u| (u == "user").then(|| credential.clone()),
                |_| vec![1],
            )
            .expect("first");
        assert_eq!(
            String::from_utf8(first).expect("utf-8"),
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
        );
        let (user, last) = server
            .client_final(
                b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
            )
            .expect("final");
        assert_eq!(user, "user");
        assert_eq!(String::from_utf8(last).expect("utf-8"), "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
        assert!(password_matches(ScramMechanism::Sha256, "pencil", &credential));
        assert!(!password_matches(ScramMechanism::Sha256, "pencil2", &credential));
    }

    #[test]
    fn a_wrong_proof_and_an_unknown_user_fail_alike_at_the_last_step() {
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").expect("base64");
        let credential = derive_credential(ScramMechanism::Sha256, "not-pencil", &salt, 4096);
        let final_message =
            b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
        for known in [true, false] {
            let mut server = ScramServer::with_nonce(ScramMechanism::Sha256, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0");
            let first = server.client_first(
                b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
                |_| known.then(|| credential.clone()),
                |_| salt.clone(),
            );
            assert!(first.is_ok(), "the first step never tells");
            assert_eq!(server.client_final(final_message), Err(AuthError::Failed));
        }
    }

    #[test]
    fn malformed_messages_are_refused() {
        let lookup = |_: &str| None;
        for message in
            [&b"p=tls-server-end-point,,n=u,r=x"[..], b"n,,r=abc", b"n,,n=u", b"n,,n=a=ZZb,r=x", b"n,,m=ext,n=u,r=x"]
        {
            let mut server = ScramServer::new(ScramMechanism::Sha512);
            assert!(
                matches!(server.client_first(message, lookup, |_| vec![1]), Err(AuthError::Malformed(_))),
                "{message:?}"
            );
        }
        let mut server = ScramServer::new(ScramMechanism::Sha512);
        assert!(server.client_final(b"c=biws,r=x,p=abc").is_err(), "final before first");
        assert_eq!(decode_name("a=2Cb=3Dc"), Ok("a,b=c".to_owned()));
    }
}
