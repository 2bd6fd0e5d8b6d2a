//! Error kinds shared by the library crates.
//!
//! Every library error can say whether retrying the same operation may succeed
//! ([`ErrorKind::Retryable`]: a network hiccup, a throttled store) or not
//! ([`ErrorKind::Fatal`]: bad configuration, a schema mismatch, a bug). The distributed runtime
//! retries only the former.

/// Whether an operation that failed may succeed when retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Retryable,
    Fatal,
}

/// Implemented by every library error type.
pub trait HasKind {
    fn kind(&self) -> ErrorKind;
    fn is_retryable(&self) -> bool {
        self.kind() == ErrorKind::Retryable
    }
}
