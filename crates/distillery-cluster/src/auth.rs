//! Shared-token authentication: every call carries `authorization: Bearer <token>`; the
//! coordinator refuses calls without the right one. The token never appears in logs or in
//! `Debug` output. Tokens are compared in constant time (`subtle`), and the embedded cluster's
//! random token comes from the operating system's random source (`getrandom`).

use subtle::ConstantTimeEq;
use tonic::metadata::MetadataValue;
use tonic::{Request, Status};

use crate::ClusterError;

/// The shared token.
#[derive(Clone)]
pub struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(***)")
    }
}

/// Environment variable holding the token when no file is given.
pub const TOKEN_ENV: &str = "DISTILLERY_TOKEN";

impl Token {
    pub fn new(s: impl Into<String>) -> Result<Token, ClusterError> {
        let s = s.into().trim().to_string();
        if s.is_empty() {
            return Err(ClusterError::Config("the token is empty".into()));
        }
        if s.parse::<MetadataValue<tonic::metadata::Ascii>>().is_err() {
            return Err(ClusterError::Config(
                "the token must be printable ASCII".into(),
            ));
        }
        Ok(Token(s))
    }

    /// The token from `file` when given, else from `DISTILLERY_TOKEN`; no token, no work.
    pub fn load(file: Option<&std::path::Path>) -> Result<Token, ClusterError> {
        match file {
            Some(f) => {
                let s = std::fs::read_to_string(f).map_err(|e| {
                    ClusterError::Config(format!("cannot read token file {}: {e}", f.display()))
                })?;
                Token::new(s)
            }
            None => match std::env::var(TOKEN_ENV) {
                Ok(s) => Token::new(s),
                Err(_) => Err(ClusterError::Config(format!(
                    "no token: pass --token-file or set {TOKEN_ENV}"
                ))),
            },
        }
    }

    /// A random token for an embedded cluster that only this process talks to: 256 bits from
    /// the operating system's random source, as 64 hex digits.
    pub fn random() -> Result<Token, ClusterError> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| {
            ClusterError::Config(format!("cannot read the system's random source: {e}"))
        })?;
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut s = String::with_capacity(64);
        for b in bytes {
            s.push(HEX[usize::from(b >> 4)] as char);
            s.push(HEX[usize::from(b & 0x0f)] as char);
        }
        Ok(Token(s))
    }

    fn bearer(&self) -> MetadataValue<tonic::metadata::Ascii> {
        format!("Bearer {}", self.0)
            .parse()
            .expect("checked ASCII at construction")
    }

    /// Server side: refuses a request without the right token.
    pub fn check<T>(&self, req: Request<T>) -> Result<Request<T>, Status> {
        let ok = req
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|t| constant_time_eq(t.as_bytes(), self.0.as_bytes()));
        if ok {
            Ok(req)
        } else {
            Err(Status::unauthenticated("missing or wrong token"))
        }
    }

    /// Client side: adds the token to a request.
    pub fn attach<T>(&self, mut req: Request<T>) -> Result<Request<T>, Status> {
        req.metadata_mut().insert("authorization", self.bearer());
        Ok(req)
    }
}

/// Compares in constant time (`subtle`), so the time taken says nothing about the token's
/// bytes (only a length mismatch returns early, and the length is no secret).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_or_missing_tokens_are_refused_and_never_printed() {
        let t = Token::new("s3cret-token").unwrap();
        assert!(!format!("{t:?}").contains("s3cret"));
        assert!(t.check(Request::new(())).is_err());
        let other = Token::new("other").unwrap();
        let req = other.attach(Request::new(())).unwrap();
        assert_eq!(
            t.check(req).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
        let req = t.attach(Request::new(())).unwrap();
        assert!(t.check(req).is_ok());
        assert!(Token::new("  ").is_err());
    }

    #[test]
    fn random_tokens_are_long_distinct_and_accepted_only_by_themselves() {
        let a = Token::random().unwrap();
        let b = Token::random().unwrap();
        assert_eq!(a.0.len(), 64);
        assert!(a.0.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a.0, b.0);
        // Usable as a bearer value, and checked both ways.
        assert!(a.check(a.attach(Request::new(())).unwrap()).is_ok());
        assert!(a.check(b.attach(Request::new(())).unwrap()).is_err());
        // A prefix or a longer token is refused too.
        let prefix = Token::new(&a.0[..63]).unwrap();
        assert!(a.check(prefix.attach(Request::new(())).unwrap()).is_err());
        let longer = Token::new(format!("{}0", a.0)).unwrap();
        assert!(a.check(longer.attach(Request::new(())).unwrap()).is_err());
    }

    #[test]
    fn constant_time_eq_compares_bytes_and_lengths() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(constant_time_eq(b"", b""));
    }
}
