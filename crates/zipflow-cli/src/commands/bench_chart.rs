//! `zipflow bench chart`: SVG charts drawn from saved benchmark results, for runs made on
//! another machine (a GPU host, one with DuckDB).
//!
//! Two inputs, both JSON:
//! - `gpu`: what `zipflow bench gpu --json` writes: per column, zipflow's decode GB/s and
//!   nvCOMP's best-ratio and fastest codecs with theirs;
//! - `queries`: what `bench/duckdb/tpch.py --json` writes: the median milliseconds of each
//!   query, thread count and engine (DuckDB on its table, DuckDB on Parquet, zipflow).

use crate::out::outln;
use crate::report::chart::{BarSeries, Bars};
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// Arguments of `zipflow bench chart`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Which results to draw.
    #[command(subcommand)]
    pub chart: Chart,
}

/// The charts `zipflow bench chart` draws.
#[derive(clap::Subcommand, Debug)]
pub enum Chart {
    /// Grouped bars of GPU decode GB/s per column: zipflow against nvCOMP's best-ratio and
    /// fastest codecs, from the JSON that `zipflow bench gpu --nvcomp ... --json PATH` wrote.
    Gpu(Files),
    /// Grouped bars of query times per query and thread count, DuckDB against zipflow, from
    /// the JSON that `bench/duckdb/tpch.py --zipflow ... --json PATH` wrote.
    Queries(Files),
}

/// The input and output of a chart.
#[derive(clap::Args, Debug)]
pub struct Files {
    /// The saved results (JSON).
    #[arg(long)]
    pub from: PathBuf,
    /// Where to write the chart (SVG); an older file there is replaced.
    #[arg(long)]
    pub svg: PathBuf,
}

/// Runs `zipflow bench chart`.
pub fn run(a: Args) -> Result<()> {
    let (files, bars) = match &a.chart {
        Chart::Gpu(f) => (f, gpu_bars(&GpuResults::parse(&read(&f.from)?)?)),
        Chart::Queries(f) => (f, query_bars(&QueryResults::parse(&read(&f.from)?)?)),
    };
    bars.write(&files.svg)?;
    outln!("wrote {}", files.svg.display());
    Ok(())
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))
}

/// The results file as JSON, or an error naming what it should be.
fn parse_json(text: &str, what: &str) -> Result<Value> {
    serde_json::from_str(text).with_context(|| format!("{what}: not JSON"))
}

/// The list under `key` of the object `v`.
fn list<'a>(v: &'a Value, key: &str, what: &str) -> Result<&'a Vec<Value>> {
    v.get(key)
        .and_then(Value::as_array)
        .with_context(|| format!("{what}: expected an object with a list `{key}`"))
}

/// Field `key` of row `i` as a string.
fn text_field(row: &Value, i: usize, key: &str, what: &str) -> Result<String> {
    row.get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .with_context(|| format!("{what}, row {}: `{key}` is missing or not a string", i + 1))
}

/// Field `key` of row `i` as a positive, finite number.
fn positive(row: &Value, i: usize, key: &str, what: &str) -> Result<f64> {
    match row.get(key).and_then(Value::as_f64) {
        Some(v) if v.is_finite() && v > 0.0 => Ok(v),
        Some(v) => bail!(
            "{what}, row {}: `{key}` is {v}, not a positive number",
            i + 1
        ),
        None => bail!("{what}, row {}: `{key}` is missing or not a number", i + 1),
    }
}

/// One column of a GPU run: zipflow's decode speed beside nvCOMP's on the same rows.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuColumn {
    /// The lineitem column.
    pub column: String,
    /// zipflow's decoded GB/s (strings: their bytes, Arrow offsets written).
    pub zipflow_gbs: f64,
    /// nvCOMP's codec with the best ratio on the column (e.g. `Cascaded-asym i64`).
    pub best_ratio_codec: String,
    /// Its decoded GB/s.
    pub best_ratio_gbs: f64,
    /// nvCOMP's fastest codec on the column.
    pub fastest_codec: String,
    /// Its decoded GB/s.
    pub fastest_gbs: f64,
}

/// The columns of a GPU run and where it was measured.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuResults {
    /// The data, device and date, e.g. `TPC-H SF10 lineitem, NVIDIA H200, 2026-12-03`.
    pub measured: Option<String>,
    /// One entry per column nvCOMP decoded.
    pub columns: Vec<GpuColumn>,
}

impl GpuResults {
    /// Reads the JSON `zipflow bench gpu --json` writes.
    pub fn parse(text: &str) -> Result<GpuResults> {
        const WHAT: &str = "GPU results";
        let v = parse_json(text, WHAT)?;
        let rows = list(&v, "columns", WHAT)?;
        if rows.is_empty() {
            bail!("{WHAT}: `columns` is empty");
        }
        let columns = rows
            .iter()
            .enumerate()
            .map(|(i, r)| {
                Ok(GpuColumn {
                    column: text_field(r, i, "column", WHAT)?,
                    zipflow_gbs: positive(r, i, "zipflow_gbs", WHAT)?,
                    best_ratio_codec: text_field(r, i, "nvcomp_best_ratio_codec", WHAT)?,
                    best_ratio_gbs: positive(r, i, "nvcomp_best_ratio_gbs", WHAT)?,
                    fastest_codec: text_field(r, i, "nvcomp_fastest_codec", WHAT)?,
                    fastest_gbs: positive(r, i, "nvcomp_fastest_gbs", WHAT)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let measured = v
            .get("measured")
            .and_then(Value::as_str)
            .map(str::to_string);
        Ok(GpuResults { measured, columns })
    }

    /// The JSON [`GpuResults::parse`] reads.
    pub fn to_json(&self) -> String {
        let columns: Vec<Value> = self
            .columns
            .iter()
            .map(|c| {
                json!({
                    "column": c.column,
                    "zipflow_gbs": c.zipflow_gbs,
                    "nvcomp_best_ratio_codec": c.best_ratio_codec,
                    "nvcomp_best_ratio_gbs": c.best_ratio_gbs,
                    "nvcomp_fastest_codec": c.fastest_codec,
                    "nvcomp_fastest_gbs": c.fastest_gbs,
                })
            })
            .collect();
        let v = json!({ "measured": self.measured, "columns": columns });
        serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
    }
}

/// GB/s per column: zipflow, nvCOMP's best-ratio codec, nvCOMP's fastest codec.
pub fn gpu_bars(r: &GpuResults) -> Bars {
    let series = |name: &str, f: &dyn Fn(&GpuColumn) -> f64| BarSeries {
        name: name.to_string(),
        values: r.columns.iter().map(|c| Some(f(c))).collect(),
    };
    Bars {
        title: "GPU decode: zipflow against nvCOMP, per column".into(),
        subtitle: r.measured.clone(),
        y_desc: "decoded GB/s (kernel time, input on the device)".into(),
        categories: r.columns.iter().map(|c| c.column.clone()).collect(),
        series: vec![
            series("zipflow", &|c| c.zipflow_gbs),
            series("nvCOMP, codec with the best ratio", &|c| c.best_ratio_gbs),
            series("nvCOMP, fastest codec", &|c| c.fastest_gbs),
        ],
    }
}

/// One measurement of a query: the median of several runs.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryRun {
    /// The query's name, e.g. `Q1`.
    pub query: String,
    /// Threads it ran on.
    pub threads: u64,
    /// Who ran it: `duckdb` (its native table), `duckdb-parquet` or `zipflow`.
    pub engine: String,
    /// Median wall milliseconds.
    pub median_ms: f64,
}

/// The medians of a query run.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryResults {
    /// The data, machine and date, when the file says.
    pub measured: Option<String>,
    /// Every (query, threads, engine) measured, each once.
    pub runs: Vec<QueryRun>,
}

impl QueryResults {
    /// Reads the JSON `bench/duckdb/tpch.py --json` writes.
    pub fn parse(text: &str) -> Result<QueryResults> {
        const WHAT: &str = "query results";
        let v = parse_json(text, WHAT)?;
        let rows = list(&v, "results", WHAT)?;
        if rows.is_empty() {
            bail!("{WHAT}: `results` is empty");
        }
        let mut runs: Vec<QueryRun> = Vec::with_capacity(rows.len());
        for (i, r) in rows.iter().enumerate() {
            let threads = match r.get("threads").and_then(Value::as_u64) {
                Some(t) if t > 0 => t,
                _ => bail!(
                    "{WHAT}, row {}: `threads` is missing or not a positive whole number",
                    i + 1
                ),
            };
            let run = QueryRun {
                query: text_field(r, i, "query", WHAT)?,
                threads,
                engine: text_field(r, i, "engine", WHAT)?,
                median_ms: positive(r, i, "median_ms", WHAT)?,
            };
            if runs.iter().any(|x| {
                (x.query.as_str(), x.threads, x.engine.as_str())
                    == (run.query.as_str(), run.threads, run.engine.as_str())
            }) {
                bail!(
                    "{WHAT}, row {}: {} on {} thread(s) by {} is given twice",
                    i + 1,
                    run.query,
                    run.threads,
                    run.engine
                );
            }
            runs.push(run);
        }
        let measured = v
            .get("measured")
            .and_then(Value::as_str)
            .map(str::to_string);
        Ok(QueryResults { measured, runs })
    }
}

/// The legend's name of an engine.
fn engine_name(engine: &str) -> String {
    match engine {
        "duckdb" => "DuckDB".into(),
        "duckdb-parquet" => "DuckDB on Parquet".into(),
        other => other.into(),
    }
}

/// Median ms per query and thread count (in the order they were measured), one series per
/// engine.
pub fn query_bars(r: &QueryResults) -> Bars {
    let mut groups: Vec<(&str, u64)> = Vec::new();
    let mut engines: Vec<&str> = Vec::new();
    for run in &r.runs {
        if !groups.contains(&(run.query.as_str(), run.threads)) {
            groups.push((run.query.as_str(), run.threads));
        }
        if !engines.contains(&run.engine.as_str()) {
            engines.push(run.engine.as_str());
        }
    }
    let series = engines
        .iter()
        .map(|&e| BarSeries {
            name: engine_name(e),
            values: groups
                .iter()
                .map(|&(q, t)| {
                    r.runs
                        .iter()
                        .find(|x| x.query == q && x.threads == t && x.engine == e)
                        .map(|x| x.median_ms)
                })
                .collect(),
        })
        .collect();
    Bars {
        title: "Query time: DuckDB against zipflow".into(),
        subtitle: r.measured.clone(),
        y_desc: "median ms (lower is faster)".into(),
        categories: groups
            .iter()
            .map(|&(q, t)| format!("{q}, {t} thread{}", if t == 1 { "" } else { "s" }))
            .collect(),
        series,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GPU: &str = r#"{"measured": "SF10, H200", "columns": [
      {"column": "l_orderkey", "zipflow_gbs": 2546, "nvcomp_best_ratio_codec": "Cascaded-asym i64",
       "nvcomp_best_ratio_gbs": 608, "nvcomp_fastest_codec": "ANS", "nvcomp_fastest_gbs": 968}]}"#;

    const QUERIES: &str = r#"{"results": [
      {"query": "Q1", "threads": 1, "engine": "duckdb", "median_ms": 301.8},
      {"query": "Q1", "threads": 1, "engine": "zipflow", "median_ms": 65.5},
      {"query": "Q6", "threads": 2, "engine": "zipflow", "median_ms": 4.8}]}"#;

    fn err<T: std::fmt::Debug>(r: Result<T>) -> String {
        match r {
            Ok(v) => panic!("accepted: {v:?}"),
            Err(e) => format!("{e:#}"),
        }
    }

    #[test]
    fn gpu_results_round_trip_and_chart() {
        let r = GpuResults::parse(GPU).unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(r.columns[0].fastest_codec, "ANS");
        assert_eq!(
            GpuResults::parse(&r.to_json()).unwrap_or_else(|e| panic!("{e:#}")),
            r
        );
        let bars = gpu_bars(&r);
        assert_eq!(bars.categories, ["l_orderkey"]);
        let values: Vec<_> = bars.series.iter().map(|s| s.values[0]).collect();
        assert_eq!(values, [Some(2546.0), Some(608.0), Some(968.0)]);
    }

    #[test]
    fn gpu_results_reject_malformed_input() {
        assert!(err(GpuResults::parse("[1, 2")).contains("GPU results: not JSON"));
        assert!(err(GpuResults::parse("[]")).contains("a list `columns`"));
        assert!(err(GpuResults::parse(r#"{"columns": []}"#)).contains("empty"));
        let no_speed = GPU.replace(r#""zipflow_gbs": 2546, "#, "");
        assert!(
            err(GpuResults::parse(&no_speed))
                .contains("row 1: `zipflow_gbs` is missing or not a number")
        );
        let negative = GPU.replace("968", "-1");
        assert!(err(GpuResults::parse(&negative)).contains("`nvcomp_fastest_gbs` is -1"));
        let unnamed = GPU.replace(r#""column": "l_orderkey""#, r#""column": 3"#);
        assert!(err(GpuResults::parse(&unnamed)).contains("`column` is missing or not a string"));
    }

    #[test]
    fn query_results_group_by_query_and_threads() {
        let r = QueryResults::parse(QUERIES).unwrap_or_else(|e| panic!("{e:#}"));
        let bars = query_bars(&r);
        assert_eq!(bars.categories, ["Q1, 1 thread", "Q6, 2 threads"]);
        assert_eq!(bars.series[0].name, "DuckDB");
        assert_eq!(bars.series[0].values, [Some(301.8), None]);
        assert_eq!(bars.series[1].name, "zipflow");
        assert_eq!(bars.series[1].values, [Some(65.5), Some(4.8)]);
    }

    #[test]
    fn query_results_reject_malformed_input() {
        assert!(err(QueryResults::parse("")).contains("query results: not JSON"));
        assert!(err(QueryResults::parse(r#"{"results": {}}"#)).contains("a list `results`"));
        let zero_threads = QUERIES.replace(r#""threads": 2"#, r#""threads": 0"#);
        assert!(err(QueryResults::parse(&zero_threads)).contains("row 3: `threads`"));
        let text_ms = QUERIES.replace("65.5", r#""65.5""#);
        assert!(err(QueryResults::parse(&text_ms)).contains("row 2: `median_ms`"));
        let no_engine = QUERIES.replace(r#", "engine": "zipflow", "median_ms": 4.8"#, "");
        assert!(err(QueryResults::parse(&no_engine)).contains("row 3: `engine`"));
        let dup = QUERIES.replace(r#""Q6", "threads": 2"#, r#""Q1", "threads": 1"#);
        assert!(err(QueryResults::parse(&dup)).contains("given twice"));
    }
}
