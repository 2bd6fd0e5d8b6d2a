//! [`KgBuilder::finish`]: the five sorts and merges that turn the spooled edges into the
//! index's files (the steps of the [module docs](super)).

use std::sync::Arc;

use arrow::array::{ArrayRef, UInt32Array};

use super::KgBuilder;
use super::edges::{map_ids, write_edges};
use super::nodes::{NodeCursor, write_nodes, write_nodes_sorted};
use super::schema::{edges_schema, subject_ids_schema};
use super::sort::{query, register, session, strings};
use crate::IndexError;
use crate::kg::{
    ADJACENCY_FILE, EDGES_BY_OBJECT_FILE, EDGES_BY_SUBJECT_FILE, GRAPHML_FILE, KgStats, Kind,
    NODES_FILE,
};

impl KgBuilder {
    /// Sorts, merges and writes the five files; returns the stats and the file names
    /// written (relative to the directory, sorted). `adjacency.bin` is written last.
    pub async fn finish(mut self) -> Result<(KgStats, Vec<String>), IndexError> {
        self.flush()?;
        self.flush_names()?;
        let spool = self.spool.close()?;
        let ends = self.ends.close()?;
        let work = &self.work;
        let ctx = session(work, self.memory)?;
        register(&ctx, "spool", &spool).await?;
        register(&ctx, "ends", &ends).await?;

        // 1. The nodes in id order.
        let nodes = work.join("nodes.parquet");
        let (n, literals) = write_nodes_sorted(
            query(
                &ctx,
                "SELECT key, kind, name, edge, alias FROM ends \
                 ORDER BY key, kind, name NULLS LAST",
            )
            .await?,
            &nodes,
        )
        .await?;

        // 2. and 3. Subjects, then objects, replaced by their ids.
        let by_subject = work.join("e1.parquet");
        let mut cursor = NodeCursor::open(&nodes)?;
        map_ids(
            query(
                &ctx,
                "SELECT subject, relation, object, object_kind, source FROM spool \
                 ORDER BY subject",
            )
            .await?,
            &by_subject,
            subject_ids_schema(),
            |b| {
                let keys = strings(b, 0)?;
                let ids = (0..b.num_rows())
                    .map(|r| cursor.seek(keys.value(r), Kind::Entity.as_str()))
                    .collect::<Result<UInt32Array, _>>()?;
                let mut cols: Vec<ArrayRef> = vec![Arc::new(ids)];
                for i in 1..5 {
                    cols.push(Arc::new(strings(b, i)?));
                }
                Ok(cols)
            },
        )
        .await?;
        register(&ctx, "e1", &by_subject).await?;
        let ided = work.join("e2.parquet");
        let mut cursor = NodeCursor::open(&nodes)?;
        map_ids(
            query(
                &ctx,
                "SELECT subject, relation, object, object_kind, source FROM e1 \
                 ORDER BY object, object_kind",
            )
            .await?,
            &ided,
            edges_schema(),
            |b| {
                let (keys, kinds) = (strings(b, 2)?, strings(b, 3)?);
                let ids = (0..b.num_rows())
                    .map(|r| cursor.seek(keys.value(r), kinds.value(r)))
                    .collect::<Result<UInt32Array, _>>()?;
                Ok(vec![
                    b.column(0).clone(),
                    Arc::new(strings(b, 1)?),
                    Arc::new(ids),
                    Arc::new(strings(b, 4)?),
                ])
            },
        )
        .await?;
        register(&ctx, "e2", &ided).await?;

        // 4. and 5. The two edge files.
        let subject_file = self.dir.join(EDGES_BY_SUBJECT_FILE);
        let edges = write_edges(
            query(
                &ctx,
                "SELECT subject, relation, object, source FROM e2 \
                 ORDER BY subject, relation, object, source",
            )
            .await?,
            &subject_file,
            [0, 1, 2, 3],
        )
        .await?;
        register(&ctx, "by_subject", &subject_file).await?;
        let object_file = self.dir.join(EDGES_BY_OBJECT_FILE);
        write_edges(
            query(
                &ctx,
                "SELECT subject, relation, object, source FROM by_subject \
                 ORDER BY object, relation, subject, source",
            )
            .await?,
            &object_file,
            [2, 1, 0, 3],
        )
        .await?;
        drop(ctx);

        crate::kg::graphml::write(&self.dir.join(GRAPHML_FILE), &nodes, &subject_file)?;
        let mut cvt = 0;
        write_nodes(
            &self.dir.join(NODES_FILE),
            &nodes,
            &subject_file,
            &object_file,
            &mut cvt,
        )?;
        crate::kg::adjacency::write(&self.dir)?;
        std::fs::remove_dir_all(work).map_err(|e| IndexError::io(work.display(), e))?;

        let stats = KgStats {
            nodes: n,
            edges,
            literals,
            duplicates: self.input - edges,
            cvt,
            wikis: Vec::new(),
        };
        tracing::info!(
            dir = %self.dir.display(),
            nodes = stats.nodes,
            edges = stats.edges,
            literals = stats.literals,
            duplicates = stats.duplicates,
            cvt = stats.cvt,
            "kg index written"
        );
        let mut files: Vec<String> = [
            NODES_FILE,
            EDGES_BY_SUBJECT_FILE,
            EDGES_BY_OBJECT_FILE,
            GRAPHML_FILE,
            ADJACENCY_FILE,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        files.sort();
        Ok((stats, files))
    }
}
