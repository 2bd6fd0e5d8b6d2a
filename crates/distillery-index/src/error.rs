//! The index crate's errors, each retryable (the store) or fatal.

use distillery_core::{ErrorKind, HasKind};

/// Errors of building, switching and reading indexes.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The object store failed (retryable: a network hiccup, a throttled store).
    #[error("index store {path}: {source}")]
    Store {
        path: String,
        #[source]
        source: object_store::Error,
    },
    /// A local file (a build's scratch directory) could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// tantivy failed.
    #[error("bm25 index {0}: {1}")]
    Tantivy(String, String),
    /// usearch failed.
    #[error("dense index {0}: {1}")]
    Usearch(String, String),
    /// Parquet or Arrow failed on a file.
    #[error("{0}: {1}")]
    Parquet(String, String),
    /// A file of an index is not what the index says it is.
    #[error("{0}: {1}")]
    Corrupt(String, String),
    /// The embedding model or server failed.
    #[error("embedding: {0}")]
    Embed(String),
    /// A request that cannot be served (an unknown version, a missing kind).
    #[error("{0}")]
    Invalid(String),
    /// A build given only what changed found no previous version to apply it to (the caller
    /// builds in full instead).
    #[error("{0}")]
    NeedsFull(String),
    /// The embedding server failed in a way a retry may cure.
    #[error("embedding server: {0}")]
    EmbedRetryable(String),
}

impl HasKind for IndexError {
    fn kind(&self) -> ErrorKind {
        match self {
            IndexError::Store { source, .. } => match source {
                object_store::Error::NotFound { .. }
                | object_store::Error::InvalidPath { .. }
                | object_store::Error::NotSupported { .. }
                | object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. } => ErrorKind::Fatal,
                _ => ErrorKind::Retryable,
            },
            IndexError::EmbedRetryable(_) => ErrorKind::Retryable,
            _ => ErrorKind::Fatal,
        }
    }
}

impl From<tantivy::TantivyError> for IndexError {
    fn from(e: tantivy::TantivyError) -> Self {
        IndexError::Tantivy(String::new(), e.to_string())
    }
}

impl IndexError {
    pub fn io(path: impl std::fmt::Display, source: std::io::Error) -> Self {
        IndexError::Io {
            path: path.to_string(),
            source,
        }
    }

    pub fn store(path: impl std::fmt::Display, source: object_store::Error) -> Self {
        IndexError::Store {
            path: path.to_string(),
            source,
        }
    }

    pub fn parquet(path: impl std::fmt::Display, e: impl std::fmt::Display) -> Self {
        IndexError::Parquet(path.to_string(), e.to_string())
    }

    pub fn tantivy(path: impl std::fmt::Display, e: impl std::fmt::Display) -> Self {
        IndexError::Tantivy(path.to_string(), e.to_string())
    }

    pub fn usearch(path: impl std::fmt::Display, e: impl std::fmt::Display) -> Self {
        IndexError::Usearch(path.to_string(), e.to_string())
    }
}
