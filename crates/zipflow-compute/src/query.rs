//! A bound single-table query and its result.

use std::fmt::Write as _;

use zipflow_core::{Error, Result};

use crate::expr::{Expr, SqlType, Value};

/// Aggregate functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggFunc {
    /// `count(*)`
    CountStar,
    /// `count(x)`: non-null values.
    Count,
    /// `sum(x)`: exact for integers and decimals (`i128`).
    Sum,
    /// `min(x)`
    Min,
    /// `max(x)`
    Max,
    /// `avg(x)`: a float, from the exact sum.
    Avg,
    /// `var_samp(x)` (`variance`): the sample variance, a float; NULL below two values.
    VarSamp,
    /// `var_pop(x)`: the population variance, a float.
    VarPop,
    /// `stddev_samp(x)` (`stddev`): the sample standard deviation, a float; NULL below two
    /// values.
    StddevSamp,
    /// `stddev_pop(x)`: the population standard deviation, a float.
    StddevPop,
}

impl AggFunc {
    /// Whether the function is one of the variances or standard deviations (which share
    /// their running mean and sum of squared deviations).
    pub fn is_moment(self) -> bool {
        matches!(
            self,
            AggFunc::VarSamp | AggFunc::VarPop | AggFunc::StddevSamp | AggFunc::StddevPop
        )
    }
}

/// One aggregate of a query.
#[derive(Debug, Clone, PartialEq)]
pub struct Aggregate {
    /// The function.
    pub func: AggFunc,
    /// Its argument over table rows (`None` for `count(*)`).
    pub arg: Option<Expr>,
    /// The result type.
    pub ty: SqlType,
    /// Over the argument's distinct values (`count(DISTINCT x)`).
    pub distinct: bool,
}

/// A column of the result.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputColumn {
    /// Header: the alias, or the expression's text.
    pub name: String,
    /// The value: over table rows for projections; over [`Expr::AggRef`] and
    /// [`Expr::KeyRef`] for aggregating queries.
    pub expr: Expr,
}

/// A single-table select/filter/aggregate/group/order query, bound to a file's columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// The table's path, as written in FROM.
    pub table: String,
    /// WHERE.
    pub filter: Option<Expr>,
    /// GROUP BY keys (column references).
    pub keys: Vec<Expr>,
    /// Aggregates; empty with no keys means a projection query.
    pub aggregates: Vec<Aggregate>,
    /// Whether the query aggregates (it has aggregates or GROUP BY).
    pub aggregating: bool,
    /// HAVING, over aggregate results and keys.
    pub having: Option<Expr>,
    /// Result columns; the last `hidden` ones exist only for ORDER BY.
    pub output: Vec<OutputColumn>,
    /// Columns at the end of `output` that are not shown.
    pub hidden: usize,
    /// ORDER BY: output column and whether descending.
    pub order_by: Vec<(usize, bool)>,
    /// LIMIT.
    pub limit: Option<u64>,
    /// OFFSET.
    pub offset: u64,
}

impl Query {
    /// Every table column the query reads, in first-use order.
    pub fn columns(&self) -> Vec<usize> {
        let mut cols = Vec::new();
        if let Some(f) = &self.filter {
            f.columns(&mut cols);
        }
        for k in &self.keys {
            k.columns(&mut cols);
        }
        for a in &self.aggregates {
            if let Some(e) = &a.arg {
                e.columns(&mut cols);
            }
        }
        if !self.aggregating {
            for o in &self.output {
                o.expr.columns(&mut cols);
            }
        }
        cols
    }
}

/// What a query returns.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryResult {
    /// Column headers.
    pub names: Vec<String>,
    /// Column types.
    pub types: Vec<SqlType>,
    /// Rows.
    pub rows: Vec<Vec<Value>>,
}

/// Output formats of [`QueryResult::render`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// An aligned text table: numbers right-aligned, text left-aligned.
    Table,
    /// RFC 4180 CSV with a header line.
    Csv,
    /// One JSON object per row, in a JSON array.
    Json,
}

impl std::str::FromStr for Format {
    type Err = Error;
    fn from_str(s: &str) -> Result<Format> {
        match s {
            "table" => Ok(Format::Table),
            "csv" => Ok(Format::Csv),
            "json" => Ok(Format::Json),
            _ => Err(Error::invalid(format!(
                "unknown format `{s}` (expected table, csv or json)"
            ))),
        }
    }
}

/// A CSV field, quoted when it needs to be.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A JSON string literal.
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A value as a JSON value: numbers bare (decimals with their exact digits), the rest quoted.
pub fn json_value(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Int(_) | Value::Decimal(..) => v.to_string(),
        Value::Float(f) if f.is_finite() => v.to_string(),
        _ => json_string(&v.to_string()),
    }
}

impl QueryResult {
    /// The result as text in `format`.
    pub fn render(&self, format: Format) -> String {
        let mut out = String::new();
        match format {
            Format::Csv => {
                let header: Vec<String> = self.names.iter().map(|n| csv_field(n)).collect();
                out.push_str(&header.join(","));
                out.push('\n');
                for row in &self.rows {
                    let cells: Vec<String> = row
                        .iter()
                        .map(|v| match v {
                            Value::Null => String::new(),
                            v => csv_field(&v.to_string()),
                        })
                        .collect();
                    out.push_str(&cells.join(","));
                    out.push('\n');
                }
            }
            Format::Json => {
                out.push('[');
                for (i, row) in self.rows.iter().enumerate() {
                    out.push_str(if i == 0 { "\n  {" } else { ",\n  {" });
                    for (j, (name, v)) in self.names.iter().zip(row).enumerate() {
                        if j > 0 {
                            out.push_str(", ");
                        }
                        let _ = write!(out, "{}: {}", json_string(name), json_value(v));
                    }
                    out.push('}');
                }
                out.push_str(if self.rows.is_empty() { "]\n" } else { "\n]\n" });
            }
            Format::Table => {
                let cells: Vec<Vec<String>> = self
                    .rows
                    .iter()
                    .map(|r| r.iter().map(Value::to_string).collect())
                    .collect();
                let widths: Vec<usize> = (0..self.names.len())
                    .map(|j| {
                        cells
                            .iter()
                            .map(|r| r[j].chars().count())
                            .chain([self.names[j].chars().count()])
                            .max()
                            .unwrap_or(0)
                    })
                    .collect();
                let numeric: Vec<bool> = self.types.iter().map(|t| t.is_numeric()).collect();
                let line = |out: &mut String, row: &[String]| {
                    let parts: Vec<String> = row
                        .iter()
                        .zip(&widths)
                        .zip(&numeric)
                        .map(|((c, &w), &num)| {
                            if num {
                                format!("{c:>w$}")
                            } else {
                                format!("{c:<w$}")
                            }
                        })
                        .collect();
                    out.push_str(parts.join("  ").trim_end());
                    out.push('\n');
                };
                line(&mut out, &self.names);
                let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
                out.push_str(&rule.join("  "));
                out.push('\n');
                for r in &cells {
                    line(&mut out, r);
                }
                let _ = writeln!(
                    out,
                    "({} row{})",
                    self.rows.len(),
                    if self.rows.len() == 1 { "" } else { "s" }
                );
            }
        }
        out
    }
}
