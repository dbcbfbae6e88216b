//! `zipflow bench gpu`: every TPC-H lineitem column decoded on the GPU beside nvCOMP 6.0 on the
//! same rows, then the fused nested plans against one kernel per primitive, in one run.
//!
//! nvCOMP's side is `nvcomp_tpch.py` (in `shared/bench`), run as a child process on a Parquet
//! copy of the same rows; it writes one JSON row per column and codec (`col`, `codec`, `mb`,
//! `ratio`, `gbs`, `ok` or `err`), which this suite joins with zipflow's columns by name.

use super::bench_chart::{GpuColumn, GpuResults, gpu_bars};
use super::gpu::{ColumnTiming, bench, fusion};
use crate::io::{TableFormat, TableSink};
use crate::out::outln;
use anyhow::{Context, Result, bail};
use arrow::record_batch::RecordBatch;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use zipflow_format::{TableWriter, WriteOptions, ZfFile};

/// Arguments of `zipflow bench gpu`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// TPC-H scale factor of the generated lineitem table.
    #[arg(long, default_value_t = 10.0)]
    pub sf: f64,
    /// Use this lineitem .zf (written here from the generated table when missing).
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// How the generated file's plans are chosen (`gpu`, `balanced`, `smallest`, `fastest`;
    /// see `zipflow compress --help`).
    #[arg(long, default_value = "gpu")]
    pub objective: String,
    /// nvCOMP's side: the path of `nvcomp_tpch.py` (shared/bench), run with `--python` on a
    /// Parquet copy of the same rows. Without it only zipflow's figures are printed.
    #[arg(long)]
    pub nvcomp: Option<PathBuf>,
    /// Python interpreter for `--nvcomp`, with nvCOMP's Python wheels, cupy, numpy and
    /// pyarrow importable (e.g. through PYTHONPATH).
    #[arg(long, default_value = "python3")]
    pub python: String,
    /// Device ordinal.
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Timed runs per column and per kernel (medians are reported).
    #[arg(long, default_value_t = 20)]
    pub reps: usize,
    /// Values per column of the fused-against-separate comparison (0 skips it).
    #[arg(long, default_value_t = 64 << 20)]
    pub fusion_rows: usize,
    /// Draw zipflow's and nvCOMP's decode GB/s per column as grouped bars into this SVG file
    /// (needs --nvcomp).
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Save the figures of that chart as JSON here (needs --nvcomp), for
    /// `zipflow bench chart gpu --from PATH --svg CHART` to draw it again.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// A working directory removed when dropped.
struct WorkDir(PathBuf);

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One row of nvCOMP's JSON output that decoded correctly.
#[derive(Debug, Clone, PartialEq)]
struct NvRow {
    /// The column as fed, e.g. `l_orderkey(i32)`.
    col: String,
    codec: String,
    /// Decoded MB (10^6 bytes) of the column as fed.
    mb: f64,
    ratio: f64,
    gbs: f64,
}

impl NvRow {
    /// The lineitem column name (`l_orderkey` of `l_orderkey(i32)`).
    fn column(&self) -> &str {
        self.col.split('(').next().unwrap_or(&self.col).trim()
    }

    /// The type it was fed as (`i32` of `l_orderkey(i32)`).
    fn fed(&self) -> &str {
        self.col
            .split_once('(')
            .map_or("", |(_, t)| t.trim_end_matches(')'))
    }

    /// Kernel milliseconds to decode the column.
    fn ms(&self) -> f64 {
        self.mb / self.gbs
    }
}

/// Parses nvCOMP's JSON rows, keeping the codecs that decoded the column correctly (not the
/// raw transfer rows, nor failed or wrong ones).
fn parse_nvcomp(json: &str) -> Result<Vec<NvRow>> {
    let v: serde_json::Value = serde_json::from_str(json).context("nvCOMP's output is not JSON")?;
    let rows = v
        .as_array()
        .context("nvCOMP's output is not a list of rows")?;
    let mut out = Vec::new();
    for r in rows {
        let s = |k: &str| r.get(k).and_then(|x| x.as_str()).map(str::to_string);
        let f = |k: &str| r.get(k).and_then(serde_json::Value::as_f64);
        let (Some(col), Some(codec), Some(mb), Some(ratio), Some(gbs)) =
            (s("col"), s("codec"), f("mb"), f("ratio"), f("gbs"))
        else {
            bail!("nvCOMP row without col, codec, mb, ratio and gbs: {r}");
        };
        let ok = r
            .get("ok")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        if ok && r.get("err").is_none() && ratio > 0.0 && gbs > 0.0 {
            out.push(NvRow {
                col,
                codec,
                mb,
                ratio,
                gbs,
            });
        }
    }
    Ok(out)
}

/// Decoded GB/s every numeric column must reach (the device copies at about 4,200).
const NUMERIC_GBS: f64 = 2500.0;
/// Decoded GB/s of string bytes every string column must reach.
const STRING_GBS: f64 = 1000.0;

/// One line of the side-by-side table for zipflow column `z`, or `None` when nvCOMP has no
/// correct row for it. The bars: a ratio at least nvCOMP's best; a numeric column at least 2x
/// nvCOMP's fastest codec and [`NUMERIC_GBS`], a string column [`STRING_GBS`] (writing Arrow
/// offsets, and without them, as nvCOMP decodes the bytes alone).
fn compare(z: &ColumnTiming, nv: &[NvRow]) -> Option<String> {
    let rows: Vec<&NvRow> = nv.iter().filter(|r| r.column() == z.name).collect();
    let best = rows.iter().max_by(|a, b| a.ratio.total_cmp(&b.ratio))?;
    let fastest = rows.iter().max_by(|a, b| a.gbs.total_cmp(&b.gbs))?;
    let zgbs = z.decoded / z.kernel_ms / 1e6;
    let bytes_gbs = z.bytes_only_ms.map(|ms| z.decoded / ms / 1e6);
    // zipflow's ratio over the plain size of the column as nvCOMP was fed it.
    let at_fed = best.mb * 1e6 / z.compressed;
    let by_bytes = zgbs / fastest.gbs;
    let by_time = fastest.ms() / z.kernel_ms;
    let yes = |ok: bool| if ok { "yes" } else { "no" };
    let ratio_bar = format!("ratio {}", yes(at_fed >= best.ratio));
    let bars = if z.strings {
        let bytes = bytes_gbs.map_or(String::new(), |g| {
            format!(", bytes only {}", yes(g >= STRING_GBS))
        });
        format!("{ratio_bar}, 1,000 GB/s {}{bytes}", yes(zgbs >= STRING_GBS))
    } else {
        format!(
            "{ratio_bar}, 2x fastest {}, 2,500 GB/s {}",
            yes(by_bytes >= 2.0),
            yes(zgbs >= NUMERIC_GBS)
        )
    };
    let gbs = match bytes_gbs {
        Some(g) => format!("{zgbs:.0} ({g:.0} bytes only)"),
        None => format!("{zgbs:.0}"),
    };
    Some(format!(
        "| {} | `{}` | {:.2} | {:.2} at {} | {gbs} | {:.2} ({}, {}, {:.0} GB/s) | {} {:.2} at {:.0} GB/s ({}) | {:.2}x | {:.2}x | {bars} |",
        z.name,
        z.shapes,
        z.decoded / z.compressed,
        at_fed,
        best.fed(),
        best.ratio,
        best.codec,
        best.fed(),
        best.gbs,
        fastest.codec,
        fastest.ratio,
        fastest.gbs,
        fastest.fed(),
        by_bytes,
        by_time,
    ))
}

/// The chart's figures for zipflow column `z`: its GB/s beside nvCOMP's codec with the best
/// ratio and its fastest, or `None` when nvCOMP has no correct row for it.
fn chart_column(z: &ColumnTiming, nv: &[NvRow]) -> Option<GpuColumn> {
    let rows: Vec<&NvRow> = nv.iter().filter(|r| r.column() == z.name).collect();
    let best = rows.iter().max_by(|a, b| a.ratio.total_cmp(&b.ratio))?;
    let fastest = rows.iter().max_by(|a, b| a.gbs.total_cmp(&b.gbs))?;
    let codec = |r: &NvRow| format!("{} {}", r.codec, r.fed());
    Some(GpuColumn {
        column: z.name.clone(),
        zipflow_gbs: z.decoded / z.kernel_ms / 1e6,
        best_ratio_codec: codec(best),
        best_ratio_gbs: best.gbs,
        fastest_codec: codec(fastest),
        fastest_gbs: fastest.gbs,
    })
}

/// Writes the `--json` figures and draws the `--svg` chart of zipflow against nvCOMP.
fn save_chart(a: &Args, device: &str, timings: &[ColumnTiming], nv: &[NvRow]) -> Result<()> {
    let results = GpuResults {
        measured: Some(format!("TPC-H SF{} lineitem, {device}", a.sf)),
        columns: timings.iter().filter_map(|z| chart_column(z, nv)).collect(),
    };
    if results.columns.is_empty() {
        bail!("nvCOMP decoded no column correctly: no chart to draw");
    }
    if let Some(path) = &a.json {
        let (target, mut file) = crate::io::AtomicFile::create(path, true)?;
        file.write_all(results.to_json().as_bytes())
            .with_context(|| format!("{}: cannot write", path.display()))?;
        target.commit()?;
        outln!("\nwrote the chart's figures to {}", path.display());
    }
    if let Some(path) = &a.svg {
        gpu_bars(&results).write(path)?;
        outln!("\nwrote the chart to {}", path.display());
    }
    Ok(())
}

/// The rows of the .zf at `path`, for a Parquet copy.
fn read_rows(path: &Path) -> Result<Vec<RecordBatch>> {
    let zf = ZfFile::open(path)?;
    zf.batches()
        .map(|b| b.map_err(anyhow::Error::from))
        .collect()
}

/// Runs `zipflow bench gpu`.
pub fn run(a: Args) -> Result<()> {
    if !(a.sf > 0.0 && a.sf <= 1000.0) {
        bail!("--sf must be in (0, 1000], got {}", a.sf);
    }
    // Fail before generating anything when there is no GPU.
    let device_name = zipflow_cuda::Gpu::open(a.device)?.info().name.clone();
    if let Some(script) = &a.nvcomp
        && !script.is_file()
    {
        bail!("--nvcomp {}: no such file", script.display());
    }
    if a.nvcomp.is_none() && (a.svg.is_some() || a.json.is_some()) {
        bail!("--svg and --json draw zipflow against nvCOMP: they need --nvcomp");
    }
    for path in a.svg.iter().chain(&a.json) {
        crate::io::check_output_dir(path)?;
    }
    let work =
        WorkDir(std::env::temp_dir().join(format!("zipflow-bench-gpu-{}", std::process::id())));
    std::fs::create_dir_all(&work.0).with_context(|| format!("creating {}", work.0.display()))?;
    let zf_path = a.file.clone().unwrap_or_else(|| work.0.join("lineitem.zf"));
    let mut batches = None;
    if !zf_path.exists() {
        crate::io::check_output_dir(&zf_path)?;
        let t = Instant::now();
        let bar = super::tpch::spinner(
            &format!("generating lineitem at SF {}", a.sf),
            crate::out::quiet(),
        );
        let b = super::tpch::generate_lineitem(a.sf);
        bar.finish_and_clear();
        let Some(first) = b.first() else {
            bail!("the generator produced no rows at SF {}", a.sf);
        };
        let bar = super::tpch::spinner("compressing", crate::out::quiet());
        let opts = WriteOptions {
            chooser: Some(zipflow_select::Chooser::shared(
                super::compress::select_options(&a.objective, None)?,
            )),
            ..WriteOptions::default()
        };
        let mut w = TableWriter::create(&zf_path, first.schema(), opts)?;
        for x in &b {
            w.write(x)?;
        }
        w.finish()?;
        bar.finish_and_clear();
        outln!(
            "TPC-H lineitem SF {}: generated and written to {} (--objective {}) in {:.1} s",
            a.sf,
            zf_path.display(),
            a.objective,
            t.elapsed().as_secs_f64()
        );
        batches = Some(b);
    }

    outln!("\n## zipflow\n");
    let timings = bench(&zf_path, a.device, a.reps.max(1), &[], true, 1)?;

    if let Some(script) = &a.nvcomp {
        outln!("\n## nvCOMP on the same rows\n");
        let batches = match batches {
            Some(b) => b,
            None => read_rows(&zf_path)?,
        };
        let parquet = work.0.join("lineitem.parquet");
        {
            let Some(first) = batches.first() else {
                bail!("{} holds no rows", zf_path.display());
            };
            let file = std::fs::File::create(&parquet)
                .with_context(|| format!("creating {}", parquet.display()))?;
            let mut sink = TableSink::new(file, TableFormat::Parquet, &first.schema(), false)?;
            for b in &batches {
                sink.write(b)?;
            }
            sink.finish()?;
        }
        drop(batches);
        let json = work.0.join("nvcomp.json");
        let status = Command::new(&a.python)
            .arg(script)
            .arg(&parquet)
            .arg(&json)
            .status()
            .with_context(|| format!("running {} {}", a.python, script.display()))?;
        if !status.success() {
            bail!(
                "{} {} failed ({status}); zipflow's figures are above",
                a.python,
                script.display()
            );
        }
        let text = std::fs::read_to_string(&json)
            .with_context(|| format!("reading {}", json.display()))?;
        let nv = parse_nvcomp(&text)?;
        outln!(
            "\n## Side by side (kernel time, input on the device, medians)\n\n\
             zipflow's ratio is also given over the column's plain size as nvCOMP was fed it \
             (e.g. i32 keys where zipflow decodes i64). \"vs fastest (GB/s)\" compares decoded \
             bytes per second, \"(time)\" the kernel time for the same rows. Bars: ratio at \
             least nvCOMP's best; a numeric column at least 2x its fastest codec's GB/s and \
             2,500 GB/s; a string column 1,000 GB/s of its bytes, writing Arrow offsets and \
             without them (\"bytes only\", as nvCOMP decodes them).\n"
        );
        outln!(
            "| column | zipflow plan | ratio | ratio as fed | GB/s | nvCOMP best ratio (codec, type, GB/s) | nvCOMP fastest | vs fastest (GB/s) | vs fastest (time) | bars met |"
        );
        outln!("| --- | --- | ---: | ---: | ---: | --- | --- | ---: | ---: | --- |");
        for z in &timings {
            if let Some(line) = compare(z, &nv) {
                outln!("{line}");
            }
        }
        save_chart(&a, &device_name, &timings, &nv)?;
    }

    if a.fusion_rows > 0 {
        outln!("\n## Fused against one kernel per primitive\n");
        fusion(a.device, a.fusion_rows.max(1024), a.reps.max(1), None)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const JSON: &str = r#"[
 {"col": "l_orderkey(i64)", "codec": "raw H2D pinned", "mb": 480.0, "ratio": 1.0, "gbs": 55.0},
 {"col": "l_orderkey(i64)", "codec": "ANS", "mb": 480.0, "ratio": 2.33, "gbs": 800.0, "ok": true},
 {"col": "l_orderkey(i32)", "codec": "Cascaded-asym", "mb": 240.0, "ratio": 19.3, "gbs": 400.0, "ok": true},
 {"col": "l_orderkey(i64)", "codec": "Cascaded-asym", "mb": 480.0, "ratio": 27.4, "gbs": 560.0, "ok": true},
 {"col": "l_orderkey(i64)", "codec": "LZ4", "mb": 480.0, "ratio": 0, "gbs": 0, "err": "failed"},
 {"col": "l_orderkey(i64)", "codec": "zstd", "mb": 480.0, "ratio": 40.0, "gbs": 900.0, "ok": false}
]"#;

    #[test]
    fn nvcomp_rows_keep_correct_codecs_only() {
        let rows = parse_nvcomp(JSON).unwrap_or_else(|e| panic!("{e}"));
        let codecs: Vec<&str> = rows.iter().map(|r| r.codec.as_str()).collect();
        assert_eq!(codecs, ["ANS", "Cascaded-asym", "Cascaded-asym"]);
        assert_eq!(rows[1].column(), "l_orderkey");
        assert_eq!(rows[1].fed(), "i32");
        assert!((rows[0].ms() - 0.6).abs() < 1e-12);
        assert!(parse_nvcomp("{}").is_err());
        assert!(parse_nvcomp(r#"[{"col": "x"}]"#).is_err());
    }

    #[test]
    fn comparison_uses_the_best_ratio_and_the_fastest_codec() {
        let nv = parse_nvcomp(JSON).unwrap_or_else(|e| panic!("{e}"));
        // 480 MB decoded in 0.25 ms from 15 MB: 1,920 GB/s, ratio 32 (at i64, the best's type).
        let z = ColumnTiming {
            name: "l_orderkey".into(),
            shapes: "delta".into(),
            decoded: 480e6,
            compressed: 15e6,
            kernel_ms: 0.25,
            strings: false,
            bytes_only_ms: None,
        };
        let line = compare(&z, &nv).unwrap_or_else(|| panic!("no line"));
        assert!(line.contains("| 32.00 | 32.00 at i64 | 1920 |"), "{line}");
        assert!(
            line.contains("27.40 (Cascaded-asym, i64, 560 GB/s)"),
            "{line}"
        );
        assert!(line.contains("ANS 2.33 at 800 GB/s (i64)"), "{line}");
        // 1920 / 800 by bytes; 0.6 ms against 0.25 by time.
        assert!(
            line.contains("| 2.40x | 2.40x | ratio yes, 2x fastest yes, 2,500 GB/s no |"),
            "{line}"
        );
        let slow = ColumnTiming {
            kernel_ms: 1.0,
            compressed: 20e6,
            ..z.clone()
        };
        let line = compare(&slow, &nv).unwrap_or_else(|| panic!("no line"));
        assert!(
            line.ends_with("| ratio no, 2x fastest no, 2,500 GB/s no |"),
            "{line}"
        );
        let fast = ColumnTiming {
            kernel_ms: 0.15,
            ..z.clone()
        };
        let line = compare(&fast, &nv).unwrap_or_else(|| panic!("no line"));
        assert!(
            line.ends_with("| ratio yes, 2x fastest yes, 2,500 GB/s yes |"),
            "{line}"
        );
        // A string column: 1,000 GB/s of its bytes, with offsets and without.
        let text = ColumnTiming {
            strings: true,
            kernel_ms: 0.6,
            bytes_only_ms: Some(0.4),
            ..z.clone()
        };
        let line = compare(&text, &nv).unwrap_or_else(|| panic!("no line"));
        assert!(line.contains("| 800 (1200 bytes only) |"), "{line}");
        assert!(
            line.ends_with("| ratio yes, 1,000 GB/s no, bytes only yes |"),
            "{line}"
        );
        let other = ColumnTiming {
            name: "l_partkey".into(),
            ..z
        };
        assert!(compare(&other, &nv).is_none());
    }
}
