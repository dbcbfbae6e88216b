//! `zipflow inspect`.

use crate::report::{Table, bytes, ratio};
use anyhow::Result;
use std::collections::BTreeMap;
use std::path::PathBuf;
use zipflow_core::stats::Scalar;
use zipflow_format::ZfFile;

/// Arguments of `zipflow inspect`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The .zf file.
    pub input: PathBuf,
    /// Also list every chunk: rows, plan, size, min, max, nulls.
    #[arg(long)]
    pub chunks: bool,
}

fn min_scalar(a: Option<Scalar>, b: Option<&Scalar>, less: bool) -> Option<Scalar> {
    match (a, b) {
        (None, b) => b.cloned(),
        (a, None) => a,
        (Some(a), Some(b)) => {
            let b_wins = match (&a, b) {
                (Scalar::Int(x), Scalar::Int(y)) => (y < x) == less && y != x,
                (Scalar::Float(x), Scalar::Float(y)) => (y < x) == less && y != x,
                (Scalar::Bytes(x), Scalar::Bytes(y)) => (y < x) == less && y != x,
                _ => false,
            };
            Some(if b_wins { b.clone() } else { a })
        }
    }
}

fn show(s: Option<&Scalar>) -> String {
    s.map_or_else(|| "-".to_string(), |s| s.to_string())
}

/// Runs `zipflow inspect`.
pub fn run(a: Args) -> Result<()> {
    let zf = ZfFile::open(&a.input)?;
    let file_size = std::fs::metadata(&a.input).map(|m| m.len()).unwrap_or(0);
    println!(
        "{}: {} rows, {} columns, {} chunks per column, {}",
        a.input.display(),
        zf.num_rows(),
        zf.columns().len(),
        zf.num_chunks(),
        bytes(file_size)
    );
    let mut t = Table::new(
        &[
            "column", "type", "plan", "size", "plain", "ratio", "min", "max", "nulls",
        ],
        3,
    );
    let (mut total_plain, mut total_packed) = (0u64, 0u64);
    for (c, col) in zf.columns().iter().enumerate() {
        let mut plans: BTreeMap<&str, usize> = BTreeMap::new();
        let (mut packed, mut plain, mut nulls) = (0u64, 0u64, 0u64);
        let (mut lo, mut hi) = (None, None);
        for i in 0..zf.num_chunks() {
            let m = zf.chunk_meta(c, i);
            *plans.entry(m.plan.as_str()).or_default() += 1;
            packed += m.compressed_bytes();
            plain += m.plain_bytes;
            nulls += m.stats.null_count;
            lo = min_scalar(lo, m.stats.min.as_ref(), true);
            hi = min_scalar(hi, m.stats.max.as_ref(), false);
        }
        total_packed += packed;
        total_plain += plain;
        let mut by_use: Vec<_> = plans.into_iter().collect();
        by_use.sort_by_key(|p| std::cmp::Reverse(p.1));
        let plan = match by_use.as_slice() {
            [] => "-".to_string(),
            [(p, _)] => p.to_string(),
            [(p, n), rest @ ..] => format!("{p} ({n} chunks; {} other plans)", rest.len()),
        };
        t.row(vec![
            col.name.clone(),
            col.column_type.to_string(),
            plan,
            bytes(packed),
            bytes(plain),
            ratio(plain, packed),
            show(lo.as_ref()),
            show(hi.as_ref()),
            nulls.to_string(),
        ]);
    }
    print!("{}", t.render());
    println!(
        "total: {} of data for {} plain, ratio {}",
        bytes(total_packed),
        bytes(total_plain),
        ratio(total_plain, total_packed)
    );
    if a.chunks {
        for (c, col) in zf.columns().iter().enumerate() {
            println!("\ncolumn `{}`:", col.name);
            let mut t = Table::new(
                &[
                    "chunk", "rows", "plan", "size", "ratio", "min", "max", "nulls",
                ],
                0,
            );
            for i in 0..zf.num_chunks() {
                let m = zf.chunk_meta(c, i);
                t.row(vec![
                    i.to_string(),
                    m.rows.to_string(),
                    m.plan.clone(),
                    bytes(m.compressed_bytes()),
                    ratio(m.plain_bytes, m.compressed_bytes()),
                    show(m.stats.min.as_ref()),
                    show(m.stats.max.as_ref()),
                    m.stats.null_count.to_string(),
                ]);
            }
            print!("{}", t.render());
        }
    }
    Ok(())
}
