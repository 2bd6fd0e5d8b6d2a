//! Errors of the readers. Bad *records* never surface here: they go to the quarantine table.
//! An [`IngestError`] means a whole input cannot be read (missing file, unreadable side file)
//! or the consumer stopped.

use distillery_core::{ErrorKind, HasKind, SinkError};

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("{location}: {source}")]
    Io {
        location: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{location}: {message}")]
    Invalid { location: String, message: String },
    #[error(transparent)]
    Sink(#[from] SinkError),
}

impl IngestError {
    pub fn io(location: impl Into<String>, source: std::io::Error) -> IngestError {
        IngestError::Io {
            location: location.into(),
            source,
        }
    }

    pub fn invalid(location: impl Into<String>, message: impl Into<String>) -> IngestError {
        IngestError::Invalid {
            location: location.into(),
            message: message.into(),
        }
    }
}

impl HasKind for IngestError {
    fn kind(&self) -> ErrorKind {
        match self {
            IngestError::Io { source, .. } => match source.kind() {
                std::io::ErrorKind::NotFound
                | std::io::ErrorKind::PermissionDenied
                | std::io::ErrorKind::InvalidData
                | std::io::ErrorKind::InvalidInput => ErrorKind::Fatal,
                _ => ErrorKind::Retryable,
            },
            IngestError::Invalid { .. } => ErrorKind::Fatal,
            IngestError::Sink(_) => ErrorKind::Fatal,
        }
    }
}
