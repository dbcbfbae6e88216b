//! `zipflow sql` through DataFusion: tables named on the command line or quoted in FROM,
//! each a [`ZfTable`], and the query planned and run by DataFusion.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use arrow::array::RecordBatch;
use datafusion::prelude::SessionConfig;
use zipflow_compute::QueryResult;
use zipflow_datafusion::ZfTable;

use super::render::to_result;

/// The tables a query may name.
#[derive(Debug, Default)]
pub struct Tables {
    /// `--table name=path`, in order.
    pub named: Vec<(String, PathBuf)>,
    /// `--db DIR`: every .zf file in it, named after its stem.
    pub db: Option<PathBuf>,
}

impl Tables {
    /// Parses the `--table` and `--db` arguments.
    pub fn parse(tables: &[String], db: Option<&Path>) -> Result<Tables> {
        let named = tables
            .iter()
            .map(|t| {
                let (name, path) = t
                    .split_once('=')
                    .ok_or_else(|| anyhow!("--table `{t}`: expected name=path"))?;
                if name.is_empty() || path.is_empty() {
                    bail!("--table `{t}`: expected name=path");
                }
                Ok((name.to_string(), PathBuf::from(path)))
            })
            .collect::<Result<_>>()?;
        Ok(Tables {
            named,
            db: db.map(Path::to_path_buf),
        })
    }

    /// Every `(name, path)` to register: the database's files first, then `--table`s (which
    /// may replace them).
    fn entries(&self) -> Result<Vec<(String, PathBuf)>> {
        let mut out = Vec::new();
        if let Some(dir) = &self.db {
            let entries = std::fs::read_dir(dir)
                .with_context(|| format!("--db {}: cannot read the directory", dir.display()))?;
            for e in entries {
                let p = e.with_context(|| format!("--db {}", dir.display()))?.path();
                if p.is_file() && p.extension().is_some_and(|x| x == "zf") {
                    let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned());
                    out.push((stem.unwrap_or_default(), p));
                }
            }
            out.sort();
            if out.is_empty() {
                bail!("--db {}: the directory holds no .zf files", dir.display());
            }
        }
        out.extend(self.named.iter().cloned());
        Ok(out)
    }
}

/// Runs `sql` through DataFusion on `threads` threads (0: one per core).
pub fn run(sql: &str, tables: &Tables, threads: usize) -> Result<QueryResult> {
    let (runtime, threads) =
        zipflow_datafusion::query::runtime(threads).context("starting the query runtime")?;
    runtime.block_on(run_async(sql, tables, threads))
}

async fn run_async(sql: &str, tables: &Tables, threads: usize) -> Result<QueryResult> {
    let config = SessionConfig::new()
        .with_target_partitions(threads)
        .with_information_schema(true);
    let ctx = zipflow_datafusion::session(config);
    let mut names = Vec::new();
    for (name, path) in tables.entries()? {
        let table = ZfTable::open(&path)
            .map_err(|e| anyhow!("table `{name}` ({}): {e}", path.display()))?;
        ctx.register_table(name.as_str(), Arc::new(table))
            .map_err(|e| anyhow!("table `{name}`: {e}"))?;
        names.push(name);
    }
    let (text, paths) =
        zipflow_datafusion::query::register_quoted_tables(&ctx, sql).map_err(|e| anyhow!("{e}"))?;
    names.extend(paths.iter().map(|p| format!("'{p}'")));
    let known = |e: datafusion::error::DataFusionError| {
        let text = e.to_string();
        if text.contains("not found") && !text.contains("No field") {
            let list = if names.is_empty() {
                "none: name a .zf file in FROM ('lineitem.zf') or use --table / --db".to_string()
            } else {
                names.join(", ")
            };
            anyhow!("{text} (tables: {list})")
        } else {
            anyhow!("{text}")
        }
    };
    let df = ctx.sql(&text).await.map_err(known)?;
    let schema = df.schema().as_arrow().clone();
    let batches: Vec<RecordBatch> = df.collect().await.map_err(known)?;
    to_result(&schema, &batches)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_arguments_need_a_name_and_a_path() {
        assert!(Tables::parse(&["lineitem".into()], None).is_err());
        assert!(Tables::parse(&["=x.zf".into()], None).is_err());
        let t = Tables::parse(&["l=x.zf".into()], None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.named, [("l".to_string(), PathBuf::from("x.zf"))]);
    }
}
