//! SASL/PLAIN (RFC 4616): `authzid NUL authcid NUL password`, checked against the user's SCRAM
//! credential, so one stored credential serves both mechanisms.

use crate::AuthError;

/// The user and password of a PLAIN message; an authzid, if given, must be the user.
pub fn parse(message: &[u8]) -> Result<(String, String), AuthError> {
    if message.len() > crate::scram::MESSAGE_BYTES_MAX {
        return Err(AuthError::Malformed("message too long"));
    }
    let text = std::str::from_utf8(message).map_err(|_| AuthError::Malformed("not UTF-8"))?;
    let mut parts = text.split('\0');
    let (Some(authzid), Some(user), Some(password), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(AuthError::Malformed("PLAIN takes authzid, user and password separated by NUL"));
    };
    if user.is_empty() || password.is_empty() {
        return Err(AuthError::Malformed("empty user or password"));
    }
    if !authzid.is_empty() && authzid != user {
        return Err(AuthError::Failed);
    }
    Ok((user.to_owned(), password.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rfc_4616_messages() {
        assert_eq!(parse(b"\0alice\0secret"), Ok(("alice".into(), "secret".into())));
        assert_eq!(parse(b"alice\0alice\0secret"), Ok(("alice".into(), "secret".into())));
        assert_eq!(parse(b"bob\0alice\0secret"), Err(AuthError::Failed));
        assert!(parse(b"alice\0secret").is_err());
        assert!(parse(b"\0alice\0").is_err());
        assert!(parse(b"\0a\0b\0c").is_err());
    }
}
