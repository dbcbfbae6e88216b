//! `zipflow inspect`.

use crate::out::{out, outln};
use crate::report::{Table, bytes, ratio};
use anyhow::Result;
use std::collections::BTreeMap;
use std::path::PathBuf;
use zipflow_core::ColumnType;
use zipflow_core::stats::Scalar;
use zipflow_core::types::TimeUnit;
use zipflow_encodings::NodeView;
use zipflow_format::ZfFile;

/// Arguments of `zipflow inspect`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The .zf file.
    pub input: PathBuf,
    /// Also list every chunk: rows, plan, size, min, max, nulls.
    #[arg(long)]
    pub chunks: bool,
    /// Show, per column, the plans the selector considers for the first chunk (re-run on its
    /// decoded values) and why the winner wins.
    #[arg(long)]
    pub explain: bool,
    /// With --explain: the objective to explain (as `compress --objective`).
    #[arg(long, default_value = "balanced", value_parser = ["smallest", "balanced", "fastest", "gpu"])]
    pub objective: String,
    /// With --explain: as `compress --min-decode-gbs`.
    #[arg(long, value_name = "GBS")]
    pub min_decode_gbs: Option<f64>,
}

/// `--explain`: the selection re-run on each column's first chunk.
fn explain(a: &Args, zf: &ZfFile, text: bool) -> Result<()> {
    let options = super::compress::select_options(&a.objective, a.min_decode_gbs)?;
    let mut scratch = zipflow_encodings::Scratch::default();
    for (c, col) in zf.columns().iter().enumerate() {
        if zf.num_chunks() == 0 {
            break;
        }
        let (values, _) = zf.read_chunk(c, 0, &mut scratch)?;
        let selection = zipflow_select::search::select(&values, text, &options);
        outln!(
            "\ncolumn `{}`, chunk 0 (stored as {}):",
            col.name,
            zf.chunk_meta(c, 0).plan
        );
        out!("{}", selection.explain(8));
    }
    Ok(())
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

/// A zone-map value as the column's type reads: decimals with their point, dates as dates,
/// timestamps as UTC date and time.
fn show(ty: ColumnType, s: Option<&Scalar>) -> String {
    match (ty, s) {
        (_, None) => "-".to_string(),
        (ColumnType::Decimal { scale, .. }, Some(Scalar::Int(v))) if scale > 0 => {
            let p = 10i128.pow(u32::from(scale.unsigned_abs()));
            let sign = if *v < 0 { "-" } else { "" };
            let w = usize::from(scale.unsigned_abs());
            format!("{sign}{}.{:0w$}", (v / p).abs(), (v % p).abs())
        }
        (ColumnType::Date32, Some(Scalar::Int(v))) => civil_date(*v as i64),
        (ColumnType::Timestamp(unit), Some(Scalar::Int(v))) => utc_time(*v as i64, unit),
        (ColumnType::Bool, Some(Scalar::Int(v))) => (*v != 0).to_string(),
        (_, Some(s)) => s.to_string(),
    }
}

/// A count of `unit` since the epoch as `YYYY-MM-DDTHH:MM:SS[.fraction]Z`, the fraction as
/// many digits as the unit has, shown when not zero.
fn utc_time(v: i64, unit: TimeUnit) -> String {
    let (per_second, digits) = match unit {
        TimeUnit::Second => (1, 0),
        TimeUnit::Millisecond => (1_000, 3),
        TimeUnit::Microsecond => (1_000_000, 6),
        TimeUnit::Nanosecond => (1_000_000_000, 9),
    };
    let (secs, frac) = (v.div_euclid(per_second), v.rem_euclid(per_second));
    let (days, s) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let fraction = if frac == 0 {
        String::new()
    } else {
        format!(".{frac:0digits$}")
    };
    format!(
        "{}T{:02}:{:02}:{:02}{fraction}Z",
        civil_date(days),
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// Days since 1970-01-01 as YYYY-MM-DD (proleptic Gregorian).
fn civil_date(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// One line per node of the tree: slot, primitive, values, bytes; and for `chartable` nodes,
/// each table's characters and use.
fn tree_lines(node: &NodeView<'_>, slot: &str, depth: usize, out: &mut Vec<String>) {
    let name = zipflow_encodings::by_id(node.id).map_or("?", |e| e.name());
    let label = if slot.is_empty() {
        name.to_string()
    } else {
        format!("{slot}: {name}")
    };
    out.push(format!(
        "{:indent$}{label}  {} {} values, {}",
        "",
        node.len,
        node.ptype,
        bytes(node.payload_size() as u64),
        indent = 2 * depth + 2
    ));
    if node.id == zipflow_encodings::chartable::ID
        && let Ok(tables) = zipflow_encodings::chartable::table_usage(node)
    {
        for (i, t) in tables.iter().enumerate() {
            out.push(format!(
                "{:indent$}table {i}: {} blocks, {} bytes, chars {:?}",
                "",
                t.blocks,
                t.bytes,
                String::from_utf8_lossy(&t.chars),
                indent = 2 * depth + 6
            ));
        }
    }
    let slots = zipflow_encodings::by_id(node.id).map_or(&[][..], |e| e.slots());
    for (i, child) in node.children.iter().enumerate() {
        let slot = slots
            .get(i)
            .map_or("?", |s| if s.name.is_empty() { "|" } else { s.name });
        tree_lines(child, slot, depth + 1, out);
    }
}

/// `inspect` of a file compressed with `--text`: bytes, ratio, and each chunk's tree.
fn run_text(a: &Args, zf: &ZfFile) -> Result<()> {
    let file_size = std::fs::metadata(&a.input).map(|m| m.len()).unwrap_or(0);
    let plain = zf.num_rows();
    outln!(
        "{}: a file's bytes (compressed with --text): {} in {} chunk{}; {} on disk, ratio {} \
         (size {:.3} of the original)",
        a.input.display(),
        bytes(plain),
        zf.num_chunks(),
        if zf.num_chunks() == 1 { "" } else { "s" },
        bytes(file_size),
        ratio(plain, file_size),
        file_size as f64 / plain.max(1) as f64,
    );
    for i in 0..zf.num_chunks() {
        let (payload_bytes, m) = zf.chunk_payload(0, i)?;
        outln!(
            "chunk {i}: {} -> {}, ratio {}, plan {}",
            bytes(m.plain_bytes),
            bytes(m.compressed_bytes()),
            ratio(m.plain_bytes, m.compressed_bytes()),
            m.plan
        );
        let values = payload_bytes
            .get(..m.values_len as usize)
            .unwrap_or(&payload_bytes);
        let node = NodeView::parse(values).map_err(|e| e.at_chunk(i as u32).in_file(&a.input))?;
        let mut lines = Vec::new();
        tree_lines(&node, "", 0, &mut lines);
        for l in lines {
            outln!("{l}");
        }
    }
    Ok(())
}

/// Runs `zipflow inspect`.
pub fn run(a: Args) -> Result<()> {
    let zf = ZfFile::open(&a.input)?;
    if zipflow_format::text::is_text(&zf) {
        run_text(&a, &zf)?;
        return if a.explain {
            explain(&a, &zf, true)
        } else {
            Ok(())
        };
    }
    let file_size = std::fs::metadata(&a.input).map(|m| m.len()).unwrap_or(0);
    outln!(
        "{}: {} rows, {} columns, {} row groups of up to {} rows, {}",
        a.input.display(),
        zf.num_rows(),
        zf.columns().len(),
        zf.num_chunks(),
        zf.chunk_rows(),
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
            [(p, n), rest @ ..] => format!(
                "{p} ({n} chunks; {} other plan{})",
                rest.len(),
                if rest.len() == 1 { "" } else { "s" }
            ),
        };
        t.row(vec![
            col.name.clone(),
            col.column_type.to_string(),
            plan,
            bytes(packed),
            bytes(plain),
            ratio(plain, packed),
            show(col.column_type, lo.as_ref()),
            show(col.column_type, hi.as_ref()),
            nulls.to_string(),
        ]);
    }
    out!("{}", t.render());
    outln!(
        "total: {} of data for {} plain, ratio {}",
        bytes(total_packed),
        bytes(total_plain),
        ratio(total_plain, total_packed)
    );
    if a.chunks {
        for (c, col) in zf.columns().iter().enumerate() {
            outln!("\ncolumn `{}`:", col.name);
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
                    show(col.column_type, m.stats.min.as_ref()),
                    show(col.column_type, m.stats.max.as_ref()),
                    m.stats.null_count.to_string(),
                ]);
            }
            out!("{}", t.render());
        }
    }
    if a.explain {
        explain(&a, &zf, false)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_as_their_type() {
        let dec = ColumnType::Decimal {
            precision: 15,
            scale: 2,
        };
        assert_eq!(show(dec, Some(&Scalar::Int(2116823))), "21168.23");
        assert_eq!(show(dec, Some(&Scalar::Int(-7))), "-0.07");
        assert_eq!(
            show(ColumnType::Date32, Some(&Scalar::Int(0))),
            "1970-01-01"
        );
        assert_eq!(
            show(ColumnType::Date32, Some(&Scalar::Int(9_568))),
            "1996-03-13"
        );
        assert_eq!(
            show(ColumnType::Date32, Some(&Scalar::Int(-1))),
            "1969-12-31"
        );
        assert_eq!(show(ColumnType::Bool, None), "-");
        let ts = |u, v| show(ColumnType::Timestamp(u), Some(&Scalar::Int(v)));
        assert_eq!(ts(TimeUnit::Second, 1_704_103_200), "2024-01-01T10:00:00Z");
        assert_eq!(ts(TimeUnit::Millisecond, -1), "1969-12-31T23:59:59.999Z");
        assert_eq!(
            ts(TimeUnit::Microsecond, 1_500_000),
            "1970-01-01T00:00:01.500000Z"
        );
        assert_eq!(ts(TimeUnit::Nanosecond, 0), "1970-01-01T00:00:00Z");
    }
}
