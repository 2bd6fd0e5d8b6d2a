//! A stage's input rows: the parts of one table from the stage's inputs, in part order, and
//! their rows streamed as records.

use distillery_core::TableKind;
use distillery_core::schema::from_batch;
use futures::StreamExt;

use crate::contract::RunCx;
use crate::error::ExecError;
use crate::parts::{WrittenPart, read_part_rows};
use crate::store::Location;

/// The parts of `table` from the stage's inputs (read or derived), in part order.
pub fn input_parts(cx: &RunCx<'_>, table: TableKind) -> Vec<WrittenPart> {
    let mut v: Vec<(String, u32, WrittenPart)> = cx
        .parts
        .iter()
        .filter(|w| w.table == table)
        .filter_map(|w| {
            let id = w.id()?;
            id.of(&cx.stage.inputs)
                .then(|| (id.tag, id.shard, w.clone()))
        })
        .collect();
    v.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    v.into_iter().map(|x| x.2).collect()
}

/// Streams the rows of parts as `T` (1,024 rows a batch); returns the parts' bytes.
pub async fn each_row<T: serde::de::DeserializeOwned>(
    out: &Location,
    table: TableKind,
    parts: &[WrittenPart],
    mut f: impl FnMut(T) -> Result<(), ExecError>,
) -> Result<u64, ExecError> {
    let mut bytes = 0;
    for part in parts {
        bytes += part.bytes;
        let mut stream = Box::pin(read_part_rows(out, &part.path(), 1024).await?);
        while let Some(batch) = stream.next().await {
            for row in from_batch::<T>(table, &batch?)? {
                f(row)?;
            }
        }
    }
    Ok(bytes)
}
