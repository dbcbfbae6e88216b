//! `zipflow sql`: run a query on .zf files, through the native engine (single-table queries
//! on compressed chunks) or DataFusion (joins, subqueries, CTEs, everything else).

#[cfg(test)]
mod differential;
pub(crate) mod engine;
mod render;

use anyhow::{Context, Result, bail};
use std::io::Write;
use std::path::PathBuf;
use zipflow_compute::query::{csv_field, json_string, json_value};
use zipflow_compute::{Format, Query, ScanOptions, Table, sql};

/// Which engine runs a query.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// The native engine when it accepts the query, DataFusion otherwise.
    Auto,
    /// zipflow's own single-table engine.
    Native,
    /// Apache DataFusion over the zipflow table provider.
    Datafusion,
}

/// Where a query runs.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// All CPU cores.
    Cpu,
    /// The GPU: single-table aggregating queries, decoded and aggregated on the device.
    Gpu,
    /// The GPU when one is usable and the query runs there, else the CPU.
    Auto,
}

/// Arguments of `zipflow sql`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The query, e.g. "SELECT l_returnflag, sum(l_quantity) FROM 'lineitem.zf' GROUP BY 1".
    /// One table (the .zf file named in FROM); filters (comparisons, BETWEEN, IN, LIKE, NOT LIKE
    /// and ILIKE with `%`, `_` and an optional ESCAPE, IS NULL, AND / OR / NOT, arithmetic
    /// with `+ - * / %`, CASE, CAST, DATE literals and intervals), scalar functions (EXTRACT
    /// of YEAR, MONTH, DAY, QUARTER, DOW or DOY and the functions of those names, date_part,
    /// date_trunc, upper, lower, length, substring, trim, ltrim, rtrim, `||`, abs, coalesce),
    /// aggregates (sum, count, min, max, avg, stddev / stddev_samp, stddev_pop, variance /
    /// var_samp, var_pop, each also over DISTINCT values), GROUP BY (columns or expressions,
    /// by name, alias or position, or ALL), SELECT DISTINCT (columns), HAVING, ORDER BY,
    /// LIMIT. Anything else (joins, subqueries, CTEs, UNION, window functions, tables named
    /// with --table or --db) runs through DataFusion. `-` reads the query from standard input.
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    pub query: Option<String>,
    /// Read the query from this file (`-`: standard input), e.g. a query too long for the
    /// command line.
    #[arg(short, long, value_name = "FILE")]
    pub file: Option<std::path::PathBuf>,
    /// Which engine runs the query: auto (native when it accepts the query, else
    /// DataFusion), native or datafusion.
    #[arg(long, value_enum, default_value = "auto")]
    pub engine: Engine,
    /// Where the query runs: cpu, gpu or auto. On the GPU, the chunks of a single-table
    /// aggregating query are decoded on the device batch by batch and one kernel generated
    /// for the query filters, groups and aggregates them there (integers, decimals and dates
    /// in columns without nulls; comparisons, IN, AND/OR/NOT, + - *, CASE; count, sum, avg,
    /// min, max; GROUP BY columns spanning at most 65,536 values together); only the
    /// per-group sums come back, and the answer equals the CPU's bit for bit. `gpu` fails
    /// with the reason when there is no usable GPU or the query cannot run there; `auto`
    /// then runs it on the CPU.
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: Device,
    /// A table for DataFusion: name=path, the path a .zf file, a directory of them or a glob
    /// (repeatable).
    #[arg(long = "table", value_name = "NAME=PATH")]
    pub tables: Vec<String>,
    /// A directory whose .zf files are tables for DataFusion, each named after its file stem.
    #[arg(long, value_name = "DIR")]
    pub db: Option<PathBuf>,
    /// Output format: table, csv or json.
    #[arg(long, default_value = "table")]
    pub format: String,
    /// Worker threads (default: one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Evaluate every row with the reference evaluator instead of the block path (slow; for
    /// checking results).
    #[arg(long)]
    pub reference: bool,
}

/// The query: the argument, or read from --file or standard input (`-`).
fn query_text(a: &Args) -> Result<String> {
    let from_stdin = || -> Result<String> {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut text)
            .context("reading the query from standard input")?;
        Ok(text)
    };
    match (&a.query, &a.file) {
        (Some(q), _) if q == "-" => from_stdin(),
        (Some(q), _) => Ok(q.clone()),
        (None, Some(f)) if f.as_os_str() == "-" => from_stdin(),
        (None, Some(f)) => std::fs::read_to_string(f)
            .with_context(|| format!("{}: cannot read the query", f.display())),
        (None, None) => anyhow::bail!("give a query, or --file FILE"),
    }
}

/// Runs the command.
pub fn run(a: Args) -> Result<()> {
    let format: Format = a.format.parse()?;
    let query = query_text(&a)?;
    if a.reference && a.engine == Engine::Datafusion {
        bail!("--reference applies to the native engine only");
    }
    let native = match a.engine {
        Engine::Native => Some(native_plan(&query)?),
        Engine::Auto => native_plan(&query).ok(),
        Engine::Datafusion => None,
    };
    if a.device != Device::Cpu {
        if a.reference {
            bail!("--reference runs on the CPU; leave out --device");
        }
        let on_gpu = match &native {
            Some((table, q)) => run_gpu(table, q),
            None if a.device == Device::Gpu => {
                let why = native_plan(&query)
                    .err()
                    .map_or_else(String::new, |e| format!(": {}", crate::one_line(&e)));
                bail!(
                    "--device gpu runs single-table aggregating queries on one .zf file; \
                     this query needs DataFusion{why}"
                );
            }
            None => Err(zipflow_core::Error::unsupported("a DataFusion query")),
        };
        match on_gpu {
            Ok(result) => {
                crate::out::Stdout::new().write_all(result.render(format).as_bytes())?;
                return Ok(());
            }
            Err(e) if a.device == Device::Gpu => {
                return Err(anyhow::Error::new(e).context("running the query on the GPU"));
            }
            // `auto`: the CPU runs it (and reports an error the GPU found, such as an
            // overflow, in its own words).
            Err(_) => {}
        }
    }
    if let Some((table, q)) = native {
        return run_native(&a, format, &table, &q);
    }
    let tables = engine::Tables::parse(&a.tables, a.db.as_deref())?;
    let result = engine::run(&query, &tables, a.threads)?;
    crate::out::Stdout::new().write_all(result.render(format).as_bytes())?;
    Ok(())
}

/// The query's table and its native plan, or why the native engine cannot run it.
fn native_plan(query: &str) -> Result<(Table, Query)> {
    let path = sql::table_of(query)?;
    let table = Table::open(&path).with_context(|| format!("opening `{path}`"))?;
    let q = sql::plan(query, &table.schema()?)?;
    Ok((table, q))
}

/// Runs a planned query on the GPU.
fn run_gpu(table: &Table, q: &Query) -> zipflow_core::Result<zipflow_compute::QueryResult> {
    // Checked first: a query the GPU cannot run fails without starting one.
    let prepared = zipflow_cuda::query::GpuQuery::new(table, q)?;
    let gpu = zipflow_cuda::Gpu::open(0)?;
    prepared.run(&gpu, table, q)
}

/// Runs a planned query on the native engine.
fn run_native(a: &Args, format: Format, table: &Table, q: &Query) -> Result<()> {
    let opts = ScanOptions {
        threads: a.threads,
        reference: a.reference,
    };
    let mut out = crate::out::Stdout::new();
    // Projections without ORDER BY stream row by row in csv and json.
    if !q.aggregating && q.order_by.is_empty() && format != Format::Table {
        let shown = q.output.len() - q.hidden;
        let names: Vec<&str> = q.output[..shown].iter().map(|o| o.name.as_str()).collect();
        let (mut skip, mut left) = (q.offset, q.limit);
        let mut first = true;
        let mut err = None;
        if format == Format::Csv {
            let header: Vec<String> = names.iter().map(|n| csv_field(n)).collect();
            writeln!(out, "{}", header.join(","))?;
        } else {
            write!(out, "[")?;
        }
        table.for_each_row(q, |row| {
            if skip > 0 {
                skip -= 1;
                return true;
            }
            if left == Some(0) {
                return false;
            }
            left = left.map(|l| l - 1);
            let line = match format {
                Format::Csv => row[..shown]
                    .iter()
                    .map(|v| match v {
                        zipflow_compute::Value::Null => String::new(),
                        v => csv_field(&v.to_string()),
                    })
                    .collect::<Vec<_>>()
                    .join(","),
                _ => {
                    let fields: Vec<String> = names
                        .iter()
                        .zip(&row)
                        .map(|(n, v)| format!("{}: {}", json_string(n), json_value(v)))
                        .collect();
                    format!(
                        "{}\n  {{{}}}",
                        if first { "" } else { "," },
                        fields.join(", ")
                    )
                }
            };
            first = false;
            let written = if format == Format::Csv {
                writeln!(out, "{line}")
            } else {
                write!(out, "{line}")
            };
            match written {
                Ok(()) => left != Some(0),
                Err(e) => {
                    err = Some(e);
                    false
                }
            }
        })?;
        if let Some(e) = err {
            return Err(e.into());
        }
        if format == Format::Json {
            writeln!(out, "{}]", if first { "" } else { "\n" })?;
        }
        return Ok(());
    }
    let result = table.run(q, &opts)?;
    out.write_all(result.render(format).as_bytes())?;
    Ok(())
}
