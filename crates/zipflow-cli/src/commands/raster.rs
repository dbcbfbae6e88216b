//! `zipflow raster`: GeoTIFF bands to .zf and fused NDVI on them; and the benchmark suites
//! `zipflow bench ndvi` and `zipflow bench sum-curve`.

use crate::out::outln;
use anyhow::{Context, Result, bail};
use rayon::prelude::*;
use std::path::{Path, PathBuf};
use std::time::Instant;
use zipflow_compute::ndvi::{self, Answer, Op, Threshold};
use zipflow_compute::raster::{self, Band, Raster};
use zipflow_core::{Plan, VECTOR_LEN};
use zipflow_encodings::bitpack;

/// Arguments of `zipflow raster`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub cmd: Cmd,
}

/// The raster commands.
#[derive(clap::Subcommand, Debug)]
pub enum Cmd {
    /// Compress a single-band TIFF into a .zf file: one column `value` of the band's sample
    /// type (uint8, uint16, uint32, int8, int16, int32, float32, float64), row-major, with the
    /// width, height and no-data value (`GDAL_NODATA`) in the schema metadata. Strips or tiles
    /// (cloud-optimised GeoTIFFs: the full-resolution image), uncompressed or Deflate, LZW or
    /// ZSTD, with or without TIFF predictors.
    Compress(CompressArgs),
    /// Aggregate NDVI = (NIR - Red) / (NIR + Red) over two uint16 bands, fused on the
    /// compressed data. No data: a pixel whose two bands are both 0 (the no-data value of
    /// Sentinel-2 and Landsat products) has no NDVI: `sum` adds nothing for it and `count`
    /// never counts it. The output gives the pixels with data. A band whose TIFF stated another
    /// no-data value (`GDAL_NODATA`) is refused.
    Ndvi(NdviArgs),
}

/// Arguments of `zipflow raster compress`.
#[derive(clap::Args, Debug)]
pub struct CompressArgs {
    /// The TIFF band.
    pub input: PathBuf,
    /// The .zf file to write.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Plan of every chunk. `predictor` (the default for integer bands): each pixel predicted
    /// from the pixels to its left, above and above-left (`above(WIDTH) | delta | zigzag |
    /// ans`), smaller than `xz -9` on Sentinel-2 bands; `auto`: chosen per chunk by the
    /// selector (the default for float bands); or any plan, e.g. `for | patch | bitpack`,
    /// which NDVI unpacks a vector at a time (larger, and faster to aggregate from memory).
    #[arg(long, default_value = "predictor")]
    pub plan: String,
    /// Replace an existing output file.
    #[arg(short, long)]
    pub force: bool,
}

/// Arguments of `zipflow raster ndvi`.
#[derive(clap::Args, Debug)]
pub struct NdviArgs {
    /// The near-infrared band (.zf).
    #[arg(long)]
    pub nir: PathBuf,
    /// The red band (.zf).
    #[arg(long)]
    pub red: PathBuf,
    /// sum (exact f32 division), sum-recip, sum-newton, count (NDVI > --t), sum-nr (SUM(N+R)).
    #[arg(long, default_value = "sum")]
    pub op: String,
    /// Threshold of `count`: a decimal with at most 4 fractional digits.
    #[arg(long)]
    pub t: Option<String>,
    /// Worker threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Also decode both bands and compute the f64 reference.
    #[arg(long)]
    pub check: bool,
}

/// Runs `zipflow raster`.
pub fn run(a: Args) -> Result<()> {
    match a.cmd {
        Cmd::Compress(a) => compress(a),
        Cmd::Ndvi(a) => ndvi_cmd(a),
    }
}

fn compress(a: CompressArgs) -> Result<()> {
    let start = Instant::now();
    let image = raster::read_image(&a.input)?;
    let plan = raster_plan(&a.plan, &image)?;
    let summary = raster::write_image(&image, &a.output, plan, a.force)?;
    let plain = image.pixels.plain_size() as u64;
    let col = summary.columns.first();
    let compressed = col.map_or(summary.bytes, |c| c.compressed_bytes);
    outln!(
        "{} x {} {} pixels{}, {plain} B plain -> {} B file ({compressed} B of chunks), ratio \
         {:.3}, plan {}, {:.2} s",
        image.width,
        image.height,
        image.pixels.ptype(),
        image
            .nodata
            .as_deref()
            .map_or(String::new(), |n| format!(" (no data: {n})")),
        summary.bytes,
        plain as f64 / compressed as f64,
        col.map_or("-".to_string(), |c| c.plan_summary()),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The plan `--plan` names for `image`: `predictor`, `auto` or a plan.
fn raster_plan(text: &str, image: &raster::Image) -> Result<raster::RasterPlan> {
    let is_int = matches!(image.pixels, zipflow_core::Values::Int(_));
    Ok(match text.trim() {
        "predictor" if is_int => raster::RasterPlan::Forced(raster::predictor_plan(image.width)),
        "predictor" | "auto" => {
            raster::RasterPlan::Chosen(zipflow_select::Chooser::shared(Default::default()))
        }
        t => raster::RasterPlan::Forced(t.parse::<Plan>().context("--plan")?),
    })
}

fn ndvi_cmd(a: NdviArgs) -> Result<()> {
    let op = Op::parse(&a.op, a.t.as_deref())?;
    let nir = Band::open(&a.nir)?;
    let red = Band::open(&a.red)?;
    let pool = ndvi::pool(a.threads)?;
    let start = Instant::now();
    let (answer, valid) = ndvi::fused_counted(op, &nir, &red, &pool)?;
    let secs = start.elapsed().as_secs_f64();
    let what = match op {
        Op::Count(t) => format!("count(ndvi > {t})"),
        Op::SumNr => "sum(nir + red)".to_string(),
        _ => format!("{}(ndvi)", op.name()),
    };
    outln!(
        "{what} = {answer}    ({} pixels, {valid} with data, {:.2} ms, {:.2} Gpixel/s)",
        nir.pixels(),
        secs * 1e3,
        nir.pixels() as f64 / secs / 1e9
    );
    if a.check {
        let (n, r) = (nir.decode()?, red.decode()?);
        outln!(
            "reference (decoded bands, f64) = {}    ({} pixels with data)",
            ndvi::reference(op, &n.pixels, &r.pixels)?,
            ndvi::valid_reference(&n.pixels, &r.pixels)
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// zipflow bench ndvi

/// Arguments of `zipflow bench ndvi`.
#[derive(clap::Args, Debug)]
pub struct BenchNdviArgs {
    /// The NIR band (TIFF).
    #[arg(long, default_value = "/work/shared/data/raster/sentinel2_B08_nir.tif")]
    pub nir: PathBuf,
    /// The red band (TIFF).
    #[arg(long, default_value = "/work/shared/data/raster/sentinel2_B04_red.tif")]
    pub red: PathBuf,
    /// Plans compared on the untiled scene (`predictor`: the default plan of `zipflow raster
    /// compress`, `above(WIDTH) | delta | zigzag | ans`).
    #[arg(
        long,
        default_values_t = ["bitpack".to_string(), "for | bitpack".to_string(),
            "for | patch | bitpack".to_string(), "predictor".to_string()]
    )]
    pub plans: Vec<String>,
    /// Plan of the DRAM-sized (tiled) bands.
    #[arg(long, default_value = "for | patch | bitpack")]
    pub dram_plan: String,
    /// Plain bytes per band of the tiled scene, in MiB (0: skip the DRAM-sized case).
    #[arg(long, default_value_t = 1024)]
    pub dram_mib: u64,
    /// Thread counts.
    #[arg(long, default_values_t = [1usize, 2])]
    pub threads: Vec<usize>,
    /// Timed runs per case (after one warm-up); the median is reported.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Folder for the compressed bands (default: a temporary folder).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Threshold of the count op.
    #[arg(long, default_value = "0.3")]
    pub t: String,
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_string())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Times `a` and `b` alternately (`runs` times each, after one warm-up of each); medians in s.
fn side_by_side<A, B>(
    runs: usize,
    mut a: impl FnMut() -> A,
    mut b: impl FnMut() -> B,
) -> (f64, f64, A, B) {
    let mut ra = a();
    let mut rb = b();
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let s = Instant::now();
        ra = std::hint::black_box(a());
        ta.push(s.elapsed().as_secs_f64());
        let s = Instant::now();
        rb = std::hint::black_box(b());
        tb.push(s.elapsed().as_secs_f64());
    }
    (median(ta), median(tb), ra, rb)
}

fn agrees(a: Answer, b: Answer, pixels: u64) -> bool {
    match (a, b) {
        (Answer::Sum(x), Answer::Sum(y)) => (x - y).abs() <= 1e-3 * pixels as f64,
        _ => a == b,
    }
}

struct Scene<'a> {
    name: &'a str,
    nir: &'a Raster,
    red: &'a Raster,
}

fn bench_scene(
    a: &BenchNdviArgs,
    dir: &Path,
    scene: &Scene<'_>,
    plans: &[String],
    ops: &[Op],
) -> Result<Vec<(&'static str, usize, f64, f64)>> {
    let pixels = scene.nir.pixels.len() as u64;
    let mut speedups = Vec::new();
    for (p, plan_text) in plans.iter().enumerate() {
        let plan: Plan = if plan_text.trim() == "predictor" {
            raster::predictor_plan(scene.nir.width)
        } else {
            plan_text
                .parse()
                .with_context(|| format!("plan `{plan_text}`"))?
        };
        let np = dir.join(format!("{}-{p}-nir.zf", scene.name));
        let rp = dir.join(format!("{}-{p}-red.zf", scene.name));
        let start = Instant::now();
        let ns = raster::write_zf(
            scene.nir,
            &np,
            raster::RasterPlan::Forced(plan.clone()),
            true,
        )?;
        let rs = raster::write_zf(scene.red, &rp, raster::RasterPlan::Forced(plan), true)?;
        let enc = start.elapsed().as_secs_f64();
        let cbytes = |s: &zipflow_format::FileSummary| {
            s.columns.first().map_or(s.bytes, |c| c.compressed_bytes)
        };
        let (nc, rc) = (cbytes(&ns), cbytes(&rs));
        outln!(
            "\n{} ({} x {}, {:.1} MiB per band plain), plan `{plan_text}`: NIR ratio {:.3}, \
             red ratio {:.3}, both {:.3} ({:.2} bits/pixel); encoded in {enc:.1} s; load {}",
            scene.name,
            scene.nir.width,
            scene.nir.height,
            pixels as f64 * 2.0 / (1 << 20) as f64,
            pixels as f64 * 2.0 / nc as f64,
            pixels as f64 * 2.0 / rc as f64,
            pixels as f64 * 4.0 / (nc + rc) as f64,
            (nc + rc) as f64 * 8.0 / pixels as f64 / 2.0,
            load_average()
        );
        let (nb, rb) = (Band::open(&np)?, Band::open(&rp)?);
        decode_line(a.runs, scene, &nb, &rb)?;
        outln!(
            "{:<11} {:>3} {:>11} {:>11} {:>8} {:>11} {:>11} {:>12} {:>8}  check",
            "op",
            "thr",
            "plain ms",
            "fused ms",
            "speedup",
            "plain Gpx/s",
            "fused Gpx/s",
            "kernel Gpx/s",
            "at most"
        );
        for &threads in &a.threads {
            let pool = ndvi::pool(threads)?;
            for &op in ops {
                let (tp, tf, rp_, rf) = side_by_side(
                    a.runs,
                    || ndvi::plain(op, &scene.nir.pixels, &scene.red.pixels, &pool),
                    || ndvi::fused(op, &nb, &rb, &pool),
                );
                let (rp_, rf) = (rp_?, rf?);
                // The kernel alone over as many vectors from cache: what the fused path can
                // reach at best, as it runs this kernel on every pixel and decodes besides.
                let vectors = pixels.div_ceil(VECTOR_LEN as u64) as usize;
                let mut tk = Vec::with_capacity(a.runs);
                for _ in 0..a.runs {
                    let s = Instant::now();
                    std::hint::black_box(ndvi::kernel_only(
                        op,
                        &scene.nir.pixels,
                        &scene.red.pixels,
                        vectors,
                        &pool,
                    )?);
                    tk.push(s.elapsed().as_secs_f64());
                }
                let tk = median(tk);
                speedups.push((op.name(), threads, tp / tf, tp / tk));
                outln!(
                    "{:<11} {threads:>3} {:>11.2} {:>11.2} {:>7.2}x {:>11.2} {:>11.2} {:>12.2} {:>7.2}x  {}",
                    op.name(),
                    tp * 1e3,
                    tf * 1e3,
                    tp / tf,
                    pixels as f64 / tp / 1e9,
                    pixels as f64 / tf / 1e9,
                    pixels as f64 / tk / 1e9,
                    tp / tk,
                    if agrees(rp_, rf, pixels) {
                        format!("ok ({rf})")
                    } else {
                        format!("MISMATCH plain {rp_} fused {rf}")
                    }
                );
            }
        }
        drop((nb, rb));
        let _ = std::fs::remove_file(&np);
        let _ = std::fs::remove_file(&rp);
    }
    Ok(speedups)
}

/// Decodes both bands whole on one thread, and copies their plain pixels as a reference of
/// memory speed; checks the decoded pixels.
fn decode_line(runs: usize, scene: &Scene<'_>, nb: &Band, rb: &Band) -> Result<()> {
    let bytes = (scene.nir.pixels.len() + scene.red.pixels.len()) as f64 * 2.0;
    let (mut td, mut tc) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let s = Instant::now();
        let (n, r) = (nb.decode()?, rb.decode()?);
        td.push(s.elapsed().as_secs_f64());
        if n != *scene.nir || r != *scene.red {
            bail!("the {} bands did not decode to their pixels", scene.name);
        }
        drop((n, r));
        let s = Instant::now();
        let copies = (scene.nir.pixels.to_vec(), scene.red.pixels.to_vec());
        tc.push(s.elapsed().as_secs_f64());
        std::hint::black_box(copies);
    }
    let (td, tc) = (median(td), median(tc));
    outln!(
        "decode both bands, one thread: {:.2} ms, {:.2} GB/s of pixels; copying the plain \
         pixels {:.2} ms, {:.2} GB/s; bit-exact",
        td * 1e3,
        bytes / td / 1e9,
        tc * 1e3,
        bytes / tc / 1e9
    );
    Ok(())
}

/// The size of `pixels`' little-endian bytes compressed by `xz -9`, if an `xz` program runs.
fn xz9_size(pixels: &[u16]) -> Option<u64> {
    use std::io::Write;
    let mut child = std::process::Command::new("xz")
        .args(["-9", "-c", "-T1"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let bytes: Vec<u8> = pixels.iter().flat_map(|p| p.to_le_bytes()).collect();
    let mut stdin = child.stdin.take()?;
    let writer = std::thread::spawn(move || stdin.write_all(&bytes));
    let out = child.wait_with_output().ok()?;
    writer.join().ok()?.ok()?;
    out.status.success().then_some(out.stdout.len() as u64)
}

/// Runs `zipflow bench ndvi`.
pub fn bench_ndvi(a: BenchNdviArgs) -> Result<()> {
    if a.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let tmp;
    let dir = match &a.dir {
        Some(d) => d.clone(),
        None => {
            tmp = TempDir::new()?;
            tmp.0.clone()
        }
    };
    let t = Threshold::parse(&a.t)?;
    let ops = [
        Op::Sum,
        Op::SumRecip,
        Op::SumNewton,
        Op::Count(t),
        Op::SumNr,
    ];
    let nir = raster::read_tiff(&a.nir)?;
    let red = raster::read_tiff(&a.red)?;
    if (nir.width, nir.height) != (red.width, red.height) {
        bail!("the bands differ in size");
    }
    outln!(
        "NDVI: fused on .zf bands vs the same kernels on plain u16 bands in memory; medians of \
         {} runs; load average at start {}",
        a.runs,
        load_average()
    );
    match (xz9_size(&nir.pixels), xz9_size(&red.pixels)) {
        (Some(n), Some(r)) => outln!(
            "xz -9 of the plain pixels: NIR {n} B (ratio {:.3}), red {r} B (ratio {:.3})",
            nir.pixels.len() as f64 * 2.0 / n as f64,
            red.pixels.len() as f64 * 2.0 / r as f64
        ),
        _ => outln!("xz -9: no `xz` program ran here, its sizes are not shown"),
    }
    let scene = Scene {
        name: "scene",
        nir: &nir,
        red: &red,
    };
    bench_scene(&a, &dir, &scene, &a.plans, &ops)?;
    if a.dram_mib > 0 {
        let per_copy = nir.pixels.len() as u64 * 2;
        let copies = (a.dram_mib << 20).div_ceil(per_copy);
        let copies = u32::try_from(copies).context("--dram-mib is too large")?;
        let (tn, tr) = (nir.tile_vertically(copies)?, red.tile_vertically(copies)?);
        drop((nir, red));
        let tiled = Scene {
            name: "tiled",
            nir: &tn,
            red: &tr,
        };
        let speedups = bench_scene(&a, &dir, &tiled, std::slice::from_ref(&a.dram_plan), &ops)?;
        let at_two = || speedups.iter().filter(|s| s.1 == 2);
        if let Some((op, _, x, _)) = at_two().min_by(|a, b| a.2.total_cmp(&b.2)) {
            outln!(
                "bar (each op fused at least 1.5x plain at 2 threads, DRAM-sized): {}; lowest {x:.2}x ({op})",
                if *x >= 1.5 { "met" } else { "not met" }
            );
        }
        let bound: Vec<String> = at_two()
            .filter(|s| s.3 < 1.5)
            .map(|s| format!("{} {:.2}x", s.0, s.3))
            .collect();
        if !bound.is_empty() {
            outln!(
                "at 2 threads the kernel alone (its arithmetic, from L1) ran at under 1.5x plain \
                 from memory for {}: in this run no plan could have made those ops 1.5x faster",
                bound.join(", ")
            );
        }
    }
    outln!("load average at end {}", load_average());
    Ok(())
}

/// A temporary folder removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir> {
        let base = std::env::temp_dir().join(format!("zipflow-bench-ndvi-{}", std::process::id()));
        std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
        Ok(TempDir(base))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ---------------------------------------------------------------------------------------------
// zipflow bench sum-curve

/// Arguments of `zipflow bench sum-curve`.
#[derive(clap::Args, Debug)]
pub struct SumCurveArgs {
    /// Values in the column, in Mi (256 Mi u32 = 1 GiB plain).
    #[arg(long, default_value_t = 256)]
    pub mi_values: usize,
    /// Bit widths (default 1..=32).
    #[arg(long, value_delimiter = ',')]
    pub widths: Vec<u32>,
    /// Thread counts.
    #[arg(long, default_values_t = [1usize, 2])]
    pub threads: Vec<usize>,
    /// Timed runs per case (after one warm-up); the median is reported.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
}

/// Fills `out` with seeded pseudo-random values of `width` bits, in parallel.
fn random_values(out: &mut [u32], width: u32) {
    let mask = if width >= 32 {
        u32::MAX
    } else {
        (1u32 << width) - 1
    };
    out.par_chunks_mut(1 << 16).enumerate().for_each(|(i, c)| {
        let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ ((i as u64 + 1) << 20) ^ u64::from(width);
        for v in c {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *v = (x >> 17) as u32 & mask;
        }
    });
}

/// Runs `zipflow bench sum-curve`.
pub fn bench_sum_curve(a: SumCurveArgs) -> Result<()> {
    if a.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let len = a.mi_values << 20;
    let widths: Vec<u32> = if a.widths.is_empty() {
        (1..=32).collect()
    } else {
        a.widths.clone()
    };
    outln!(
        "SUM over {} Mi u32 values ({:.2} GiB plain): fused over bit-packed words vs plain; \
         medians of {} runs; load average at start {}",
        a.mi_values,
        len as f64 * 4.0 / (1u64 << 30) as f64,
        a.runs,
        load_average()
    );
    outln!(
        "{:>5} {:>3} {:>10} {:>10} {:>8} {:>11} {:>11} {:>11}",
        "width",
        "thr",
        "plain ms",
        "packed ms",
        "speedup",
        "plain GB/s",
        "packed Gv/s",
        "plain Gv/s"
    );
    let pools = a
        .threads
        .iter()
        .map(|&t| ndvi::pool(t).map(|p| (t, p)))
        .collect::<zipflow_core::Result<Vec<_>>>()?;
    let mut values = vec![0u32; len];
    // The lowest speedup at a width up to 16, against the bar of 2x there.
    let mut lowest: Option<(f64, u32, usize)> = None;
    for &w in &widths {
        if w == 0 || w > 32 {
            bail!("width {w} is outside 1..=32");
        }
        random_values(&mut values, w);
        let words = bitpack::pack(&values, w);
        let expected: u64 = values.par_iter().map(|&v| u64::from(v)).sum();
        for (t, pool) in &pools {
            let (tp, tf, sp, sf) = side_by_side(
                a.runs,
                || ndvi::plain_sum(&values, pool),
                || ndvi::packed_sum(&words, w, pool),
            );
            let sf = sf?;
            if sp != expected || sf != expected {
                bail!("width {w}: sums differ: expected {expected}, plain {sp}, packed {sf}");
            }
            if w <= 16 && lowest.is_none_or(|(x, _, _)| tp / tf < x) {
                lowest = Some((tp / tf, w, *t));
            }
            outln!(
                "{w:>5} {t:>3} {:>10.2} {:>10.2} {:>7.2}x {:>11.2} {:>11.2} {:>11.2}",
                tp * 1e3,
                tf * 1e3,
                tp / tf,
                len as f64 * 4.0 / tp / 1e9,
                len as f64 / tf / 1e9,
                len as f64 / tp / 1e9,
            );
        }
    }
    if let Some((x, w, t)) = lowest {
        outln!(
            "bar (fused at least 2x plain at every width up to 16): {}; lowest {x:.2}x (width {w}, {t} threads)",
            if x >= 2.0 { "met" } else { "not met" }
        );
    }
    outln!("load average at end {}", load_average());
    Ok(())
}
