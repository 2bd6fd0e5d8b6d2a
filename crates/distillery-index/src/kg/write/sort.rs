//! The build's DataFusion side: a session whose sorts spill to disk, SQL queries read as
//! ordered streams, and the columns of their batches.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{RecordBatch, StringArray, UInt32Array};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use datafusion::execution::memory_pool::FairSpillPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::physical_plan::SendableRecordBatchStream;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use futures::StreamExt;

use crate::IndexError;

pub(super) fn sort_err(what: &str, e: impl std::fmt::Display) -> IndexError {
    IndexError::Invalid(format!("kg build: {what}: {e}"))
}

/// A DataFusion session whose sorts spill to `work/spill` past `memory` bytes.
pub(super) fn session(work: &Path, memory: usize) -> Result<SessionContext, IndexError> {
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_pool(Arc::new(FairSpillPool::new(memory)))
        .with_temp_file_path(work.join("spill"))
        .build_arc()
        .map_err(|e| sort_err("runtime", e))?;
    // One sort at a time holds the whole budget: parallel sorts split it, and merging many
    // spilled runs then found too little memory left on large graphs.
    let mut config = SessionConfig::new().with_target_partitions(1);
    // What the sort keeps back for merging its spilled runs.
    config.options_mut().execution.sort_spill_reservation_bytes = memory / 4;
    // Plain Utf8 columns, as the index files hold them.
    config
        .options_mut()
        .execution
        .parquet
        .schema_force_view_types = false;
    Ok(SessionContext::new_with_config_rt(config, runtime))
}

pub(super) async fn register(
    ctx: &SessionContext,
    name: &str,
    path: &Path,
) -> Result<(), IndexError> {
    let url = path
        .to_str()
        .ok_or_else(|| sort_err(name, "path is not UTF-8"))?;
    ctx.register_parquet(name, url, ParquetReadOptions::default())
        .await
        .map_err(|e| sort_err(name, e))
}

pub(super) async fn query(
    ctx: &SessionContext,
    sql: &str,
) -> Result<SendableRecordBatchStream, IndexError> {
    ctx.sql(sql)
        .await
        .map_err(|e| sort_err(sql, e))?
        .execute_stream()
        .await
        .map_err(|e| sort_err(sql, e))
}

pub(super) async fn next(
    s: &mut SendableRecordBatchStream,
    show: &Path,
) -> Result<Option<RecordBatch>, IndexError> {
    match s.next().await {
        None => Ok(None),
        Some(b) => b
            .map(Some)
            .map_err(|e| sort_err(&show.display().to_string(), e)),
    }
}

/// Column `i` of a batch as plain Utf8 (DataFusion may hand out other string layouts).
pub(in crate::kg) fn strings(b: &RecordBatch, i: usize) -> Result<StringArray, IndexError> {
    let c = cast(b.column(i), &DataType::Utf8).map_err(|e| sort_err("utf8", e))?;
    c.as_any()
        .downcast_ref::<StringArray>()
        .cloned()
        .ok_or_else(|| sort_err("utf8", "not a string column"))
}

pub(in crate::kg) fn ids(b: &RecordBatch, i: usize) -> Result<&UInt32Array, IndexError> {
    b.column(i)
        .as_any()
        .downcast_ref::<UInt32Array>()
        .ok_or_else(|| sort_err("ids", "not a UInt32 column"))
}
