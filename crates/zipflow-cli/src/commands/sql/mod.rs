//! `zipflow sql`: run a single-table query on a .zf file.

use anyhow::{Context, Result};
use std::io::Write;
use zipflow_compute::query::{csv_field, json_string, json_value};
use zipflow_compute::{Format, ScanOptions, Table, sql};

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
    /// LIMIT.
    pub query: String,
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

/// Runs the command.
pub fn run(a: Args) -> Result<()> {
    let format: Format = a.format.parse()?;
    let path = sql::table_of(&a.query)?;
    let table = Table::open(&path).with_context(|| format!("opening `{path}`"))?;
    let q = sql::plan(&a.query, &table.schema())?;
    let opts = ScanOptions {
        threads: a.threads,
        reference: a.reference,
    };
    let mut out = std::io::stdout().lock();
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
        table.for_each_row(&q, |row| {
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
    let result = table.run(&q, &opts)?;
    out.write_all(result.render(format).as_bytes())?;
    Ok(())
}
