//! `distillery inspect`: DataFusion SQL over a published output.
//!
//! Each table of the manifest is registered under its name as a listing table over exactly the
//! files the manifest lists (never a directory scan, so leftovers of a failed run are never
//! read); tables without files are registered empty with their schema, so every query that
//! names a known table works.
//!
//! Without `--sql` the overview lists tables, other files and stages; for an output with SFT
//! samples it adds the dataset view ([`SFT_VIEW`]), computed with SQL over the `sft` and
//! `labels` tables.
//!
//! Queries only read: `--sql` runs with DataFusion's [`SQLOptions`] refusing DDL (`CREATE
//! [EXTERNAL] TABLE`, `CREATE VIEW`, `DROP`), DML (`INSERT`, `COPY ... TO`) and statements
//! (`SET`, `PREPARE`), and URL tables (a file path as a table name) are never enabled, so a
//! query neither reads nor writes a file outside the output. `--allow-writes` lifts the first
//! three for a user who wants them.

use crate::out::{out, outln};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::datasource::MemTable;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::execution::context::SQLOptions;
use datafusion::prelude::{DataFrame, SessionContext};
use distillery_core::TableKind;
use distillery_core::schema::schema_of;
use distillery_exec::publish::{read_manifest, read_summary};
use distillery_exec::store::open_location;

use crate::args::{InspectArgs, OutFormat};

/// `distillery inspect URL [--sql QUERY] [--format table|csv|json] [--allow-writes]`.
pub async fn run(a: &InspectArgs) -> Result<ExitCode> {
    inspect(&a.url, a.sql.as_deref(), a.format, a.allow_writes).await?;
    Ok(ExitCode::SUCCESS)
}

/// What a query may do: only read, unless `allow_writes`.
fn sql_options(allow_writes: bool) -> SQLOptions {
    SQLOptions::new()
        .with_allow_ddl(allow_writes)
        .with_allow_dml(allow_writes)
        .with_allow_statements(allow_writes)
}

/// Plans `sql` and refuses it when `options` do not allow what it does (checked on the plan,
/// before anything runs), with a message saying how to allow it.
async fn query(ctx: &SessionContext, sql: &str, allow_writes: bool) -> Result<DataFrame> {
    let plan = ctx
        .state()
        .create_logical_plan(sql)
        .await
        .with_context(|| format!("query: {sql}"))?;
    if let Err(e) = sql_options(allow_writes).verify_plan(&plan) {
        anyhow::bail!(
            "query refused: {}; `inspect --sql` only reads the output's tables (no CREATE, \
             DROP, INSERT, COPY or SET); pass --allow-writes to run it anyway",
            e.strip_backtrace()
        );
    }
    ctx.execute_logical_plan(plan)
        .await
        .with_context(|| format!("query: {sql}"))
}

/// Builds a DataFusion session with the output's tables registered (and no URL tables: a
/// table name is never read as a file path).
pub async fn session_for(url: &str) -> Result<SessionContext> {
    let loc = open_location(url, false)?;
    let manifest = read_manifest(&loc).await?;
    let ctx = SessionContext::new();
    let base_url: String = match &loc.local_dir {
        Some(dir) => dir.display().to_string(),
        None => {
            let parsed = url::Url::parse(url).context("output URL")?;
            let store_url = url::Url::parse(&format!(
                "{}://{}",
                parsed.scheme(),
                parsed.host_str().unwrap_or_default()
            ))?;
            ctx.register_object_store(&store_url, loc.store.clone());
            url.trim_end_matches('/').to_string()
        }
    };
    for t in &manifest.tables {
        let Some(kind) = TableKind::from_name(&t.name) else {
            continue;
        };
        let schema = schema_of(kind);
        if t.files.is_empty() {
            let empty = MemTable::try_new(schema, vec![vec![]])?;
            ctx.register_table(t.name.as_str(), Arc::new(empty))?;
            continue;
        }
        let urls = t
            .files
            .iter()
            .map(|f| ListingTableUrl::parse(format!("{base_url}/{}", f.path)))
            .collect::<Result<Vec<_>, _>>()?;
        let options =
            ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
        let config = ListingTableConfig::new_with_multi_paths(urls)
            .with_listing_options(options)
            .with_schema(schema);
        ctx.register_table(t.name.as_str(), Arc::new(ListingTable::try_new(config)?))?;
    }
    Ok(ctx)
}

/// Runs a query (or lists the tables) and prints the result.
pub async fn inspect(
    url: &str,
    sql: Option<&str>,
    format: OutFormat,
    allow_writes: bool,
) -> Result<()> {
    let Some(sql) = sql else {
        return overview(url).await;
    };
    let ctx = session_for(url).await?;
    let batches = query(&ctx, sql, allow_writes).await?.collect().await?;
    let out = render(&batches, format)?;
    out!("{out}");
    Ok(())
}

async fn overview(url: &str) -> Result<()> {
    let loc = open_location(url, false)?;
    let manifest = read_manifest(&loc).await?;
    outln!(
        "output {url}: pipeline `{}` (hash {}), run {}",
        manifest.pipeline,
        &manifest.pipeline_hash[..manifest.pipeline_hash.len().min(12)],
        manifest.run_id
    );
    for t in &manifest.tables {
        outln!(
            "  {:<12} {:>10} rows  {:>3} file(s)",
            t.name,
            t.rows,
            t.files.len()
        );
    }
    if !manifest.files.is_empty() {
        outln!("files:");
        for f in &manifest.files {
            outln!("  {:<24} {:>10} rows {:>11} bytes", f.path, f.rows, f.bytes);
        }
    }
    if let Ok(s) = read_summary(&loc).await {
        outln!("stages:");
        for st in &s.stages {
            outln!(
                "  {:<22} in {:>9} out {:>9} quarantined {:>6} {:>8.2} s",
                st.stage,
                st.records_in,
                st.records_out,
                st.quarantined,
                st.seconds
            );
        }
    }
    let samples = manifest.table(TableKind::Sft.name()).map_or(0, |t| t.rows);
    if samples > 0 {
        let ctx = session_for(url).await?;
        for (title, sql) in SFT_VIEW {
            let batches = query(&ctx, sql, false).await?.collect().await?;
            outln!("{title}:");
            out!("{}", render(&batches, OutFormat::Table)?);
        }
    }
    outln!("query with: distillery inspect {url} --sql \"SELECT * FROM documents LIMIT 5\"");
    Ok(())
}

/// Nearest-rank percentiles (p50, p90, p99, max) of one token column per task.
macro_rules! token_percentiles {
    ($col:literal) => {
        concat!(
            "SELECT task, '",
            $col,
            "' AS tokens, max(n) AS samples, ",
            "max(CASE WHEN rn <= ceil(0.50 * n) THEN v END) AS p50, ",
            "max(CASE WHEN rn <= ceil(0.90 * n) THEN v END) AS p90, ",
            "max(CASE WHEN rn <= ceil(0.99 * n) THEN v END) AS p99, ",
            "max(v) AS max ",
            "FROM (SELECT task, ",
            $col,
            "_tokens AS v, ",
            "row_number() OVER (PARTITION BY task ORDER BY ",
            $col,
            "_tokens) AS rn, ",
            "count(*) OVER (PARTITION BY task) AS n FROM sft) GROUP BY task"
        )
    };
}

/// The SFT dataset view of `inspect` without `--sql`: (title, query).
pub const SFT_VIEW: &[(&str, &str)] = &[
    (
        "sft samples per task and dataset",
        "SELECT task, dataset, count(*) AS samples, \
         sum(CASE WHEN split = 'train' THEN 1 ELSE 0 END) AS train, \
         sum(CASE WHEN split = 'validation' THEN 1 ELSE 0 END) AS validation \
         FROM sft GROUP BY task, dataset ORDER BY task, dataset",
    ),
    (
        "token lengths (prompt / target) per task",
        concat!(
            token_percentiles!("prompt"),
            " UNION ALL ",
            token_percentiles!("target"),
            " ORDER BY task, tokens"
        ),
    ),
    (
        "steps per trajectory (iteration samples)",
        "SELECT steps, count(*) AS trajectories FROM \
         (SELECT DISTINCT question_id, method, steps FROM sft \
          WHERE task = 'hseq_iteration' AND steps IS NOT NULL) \
         GROUP BY steps ORDER BY steps",
    ),
    (
        "samples sufficient at step n, per task",
        "SELECT task, step, count(*) AS samples, \
         sum(CASE WHEN sufficient THEN 1 ELSE 0 END) AS sufficient, \
         round(100.0 * avg(CASE WHEN sufficient THEN 1.0 ELSE 0.0 END), 1) AS sufficient_pct \
         FROM sft WHERE step IS NOT NULL GROUP BY task, step ORDER BY task, step",
    ),
    (
        "labels per dataset and method",
        // Stand-ins a trajectory picked (`within:`) are not the method's positives.
        "SELECT l.dataset, l.method, count(*) AS questions, \
         round(avg(cardinality(l.positives) - coalesce(w.n, 0)), 2) AS positives_avg, \
         round(100.0 * avg(CASE WHEN l.low_confidence THEN 1.0 ELSE 0.0 END), 1) AS low_confidence_pct, \
         round(100.0 * avg(CASE WHEN l.sufficient THEN 1.0 ELSE 0.0 END), 1) AS sufficient_pct \
         FROM labels l LEFT JOIN (SELECT id, count(*) AS n FROM \
         (SELECT id, unnest(positives) AS p FROM labels) \
         WHERE starts_with(p['reason'], 'within:') GROUP BY id) w ON w.id = l.id \
         GROUP BY l.dataset, l.method ORDER BY l.dataset, l.method",
    ),
];

/// Renders batches as a table, CSV (nested values rendered as text) or a JSON array.
pub fn render(batches: &[RecordBatch], format: OutFormat) -> Result<String> {
    Ok(match format {
        OutFormat::Table => format!("{}\n", pretty_format_batches(batches)?),
        OutFormat::Json => {
            let mut w = datafusion::arrow::json::ArrayWriter::new(Vec::new());
            let refs: Vec<&RecordBatch> = batches.iter().collect();
            w.write_batches(&refs)?;
            w.finish()?;
            let mut s = String::from_utf8(w.into_inner())?;
            if s.is_empty() {
                s.push_str("[]");
            }
            s.push('\n');
            s
        }
        OutFormat::Csv => {
            let mut out = String::new();
            if let Some(first) = batches.first() {
                let names: Vec<String> = first
                    .schema()
                    .fields()
                    .iter()
                    .map(|f| csv_field(f.name()))
                    .collect();
                out.push_str(&names.join(","));
                out.push('\n');
            }
            let opts = FormatOptions::default().with_null("");
            for b in batches {
                let fmts = b
                    .columns()
                    .iter()
                    .map(|c| ArrayFormatter::try_new(c.as_ref(), &opts))
                    .collect::<Result<Vec<_>, _>>()?;
                for row in 0..b.num_rows() {
                    let cells: Vec<String> = fmts
                        .iter()
                        .map(|f| csv_field(&f.value(row).to_string()))
                        .collect();
                    out.push_str(&cells.join(","));
                    out.push('\n');
                }
            }
            out
        }
    })
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
