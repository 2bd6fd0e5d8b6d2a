//! The `label` stage (being written).

use distillery_core::spec::{Pipeline, StageSpec};
use distillery_core::summary::StageSummary;

use crate::error::ExecError;
use crate::parts::WrittenPart;
use crate::store::Location;

/// Runs the label stage.
pub async fn run_stage(
    _p: &Pipeline,
    stage: &StageSpec,
    _out: &Location,
    _staging: &str,
    _parts: &[WrittenPart],
    _parallelism: usize,
) -> Result<(StageSummary, Vec<WrittenPart>), ExecError> {
    Err(ExecError::Task(format!(
        "stage `{}`: label stage under construction",
        stage.name
    )))
}
