//! Reader under construction (placeholder replaced by its owner).

use distillery_core::RecordSink;

use crate::{IngestError, InputCtx};

/// Reads the input.
pub fn read(ctx: &InputCtx<'_>, _sink: &mut dyn RecordSink) -> Result<(), IngestError> {
    Err(IngestError::invalid(&ctx.location, "reader under construction"))
}
