//! Errors of the executor, each with a retryable/fatal kind.

use distillery_core::{ErrorKind, HasKind};

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("object store {location}: {source}")]
    Store {
        location: String,
        #[source]
        source: object_store::Error,
    },
    #[error("parquet {location}: {source}")]
    Parquet {
        location: String,
        #[source]
        source: parquet::errors::ParquetError,
    },
    #[error(transparent)]
    Ingest(#[from] distillery_ingest::IngestError),
    #[error(transparent)]
    Schema(#[from] distillery_core::schema::SchemaError),
    #[error(transparent)]
    Label(#[from] distillery_label::LabelError),
    #[error(transparent)]
    Llm(#[from] distillery_llm::LlmError),
    #[error(transparent)]
    Extract(#[from] distillery_triples::ExtractError),
    #[error(transparent)]
    Index(#[from] distillery_index::IndexError),
    /// A spending limit of `[llm.budget]` was reached: the run stopped cleanly.
    #[error("budget: {0}")]
    Budget(String),
    #[error("inputs: {0}")]
    Inputs(String),
    #[error("{0}")]
    BadRatio(String),
    #[error("output {location}: {message}")]
    Output { location: String, message: String },
    #[error("hseq verification failed: {0}")]
    Verify(String),
    #[error("task failed: {0}")]
    Task(String),
}

impl ExecError {
    pub fn store(location: impl Into<String>, source: object_store::Error) -> ExecError {
        ExecError::Store {
            location: location.into(),
            source,
        }
    }

    pub fn parquet(
        location: impl Into<String>,
        source: parquet::errors::ParquetError,
    ) -> ExecError {
        ExecError::Parquet {
            location: location.into(),
            source,
        }
    }

    pub fn output(location: impl Into<String>, message: impl Into<String>) -> ExecError {
        ExecError::Output {
            location: location.into(),
            message: message.into(),
        }
    }
}

impl HasKind for ExecError {
    fn kind(&self) -> ErrorKind {
        match self {
            ExecError::Store { source, .. } => match source {
                object_store::Error::NotFound { .. }
                | object_store::Error::InvalidPath { .. }
                | object_store::Error::NotSupported { .. }
                | object_store::Error::PermissionDenied { .. }
                | object_store::Error::Unauthenticated { .. }
                | object_store::Error::UnknownConfigurationKey { .. } => ErrorKind::Fatal,
                _ => ErrorKind::Retryable,
            },
            // An external error under a Parquet writer or reader is the object store's I/O
            // (a failed upload, a dropped connection): worth another attempt. The rest are
            // malformed data, which another attempt would meet again.
            ExecError::Parquet {
                source: parquet::errors::ParquetError::External(_),
                ..
            } => ErrorKind::Retryable,
            ExecError::Ingest(e) => e.kind(),
            ExecError::Label(e) => e.kind(),
            ExecError::Llm(e) => e.kind(),
            ExecError::Extract(e) => e.kind(),
            ExecError::Index(e) => e.kind(),
            ExecError::Task(_) => ErrorKind::Retryable,
            _ => ErrorKind::Fatal,
        }
    }
}
