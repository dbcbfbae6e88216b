//! One module per subcommand.

pub mod bench;
pub mod bench_chart;
pub mod bench_df;
pub mod bench_gpu;
pub mod bench_gpu_encode;
pub mod bench_real;
pub mod bench_selection;
pub mod bench_text;
pub mod compress;
pub mod decompress;
pub mod gpu;
pub mod inspect;
pub mod lineitem;
pub mod raster;
pub mod sql;
pub mod tpch;
pub mod tpch_db;

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::HashMap;
use zipflow_core::Plan;

/// Parses `--plan COLUMN=PLAN` arguments.
pub fn parse_plans(args: &[String]) -> Result<HashMap<String, Plan>> {
    let mut plans = HashMap::new();
    for a in args {
        let Some((column, text)) = a.split_once('=') else {
            bail!(
                "--plan `{a}`: expected COLUMN=PLAN, e.g. --plan 'l_orderkey=delta | for | bitpack'"
            );
        };
        let plan: Plan = text
            .parse()
            .with_context(|| format!("--plan for column `{column}`"))?;
        if plans.insert(column.trim().to_string(), plan).is_some() {
            bail!("--plan given twice for column `{column}`");
        }
    }
    Ok(plans)
}

/// A progress bar counting bytes on stderr, hidden when `quiet` or when stderr is not a
/// terminal.
pub fn progress_bytes(total: Option<u64>, what: &str, quiet: bool) -> ProgressBar {
    if quiet || crate::out::quiet() {
        return ProgressBar::hidden();
    }
    let bar = match total {
        Some(n) => ProgressBar::new(n).with_style(
            ProgressStyle::with_template(
                "{msg:12} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta} left)",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        ),
        None => ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{spinner} {msg:12} {bytes} ({bytes_per_sec})")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        ),
    };
    bar.set_message(what.to_string());
    bar
}

/// A progress bar on stderr, hidden when `quiet` or when stderr is not a terminal.
pub fn progress(total: Option<u64>, what: &str, quiet: bool) -> ProgressBar {
    if quiet || crate::out::quiet() {
        return ProgressBar::hidden();
    }
    let bar = match total {
        Some(n) => ProgressBar::new(n).with_style(
            ProgressStyle::with_template(
                "{msg:12} [{bar:40}] {human_pos}/{human_len} rows ({per_sec}, {eta} left)",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        ),
        None => ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{spinner} {msg:12} {human_pos} rows ({per_sec})")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        ),
    };
    bar.set_message(what.to_string());
    bar
}
