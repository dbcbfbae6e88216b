//! `zipflow bench gpu-encode`: the character coders encoding text on the GPU beside the same
//! plans on all CPU cores, one run, with the GPU's bytes checked against the CPU's.
//!
//! Per file and coder: the CPU encoder over all cores (wall time), the GPU from host memory
//! to host memory (wall time: staging, copies, kernels, the stream back), and the GPU kernels
//! alone (CUDA events); medians of `--runs`. `chartable`'s tables are trained on the CPU (as
//! `zipflow compress` does) and the GPU encodes with the CPU's choice, so the GPU figures
//! leave the training out and the CPU's include it.

use crate::out::{out, outln};
use crate::report::{Table, bytes};
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::time::Instant;
use zipflow_core::{IntVec, Plan, Values};
use zipflow_cuda::encode::{TableChoice, TextCoder, encode_text};
use zipflow_encodings::NodeView;

/// Arguments of `zipflow bench gpu-encode`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Files to encode (.bz2 files are unpacked first). Default: a 28 MB English text made
    /// of the Silesia file dickens repeated (the size of the published benchmark's Wikipedia
    /// file), then dickens, xml, reymont and nci from --silesia.
    pub files: Vec<PathBuf>,
    /// Where the Silesia files are.
    #[arg(long, default_value = "../shared/data/silesia")]
    pub silesia: PathBuf,
    /// Runs per measurement; the median is reported.
    #[arg(long, default_value_t = 7)]
    pub runs: usize,
    /// GPU ordinal.
    #[arg(long, default_value_t = 0)]
    pub device: usize,
}

/// Bytes of the default English text.
const WIKI_LIKE: usize = 28 * 1000 * 1000;

/// Runs `zipflow bench gpu-encode`.
pub fn run(a: Args) -> Result<()> {
    let gpu = zipflow_cuda::Gpu::open(a.device)?;
    let inputs: Vec<(String, Vec<u8>)> = if a.files.is_empty() {
        let dickens = super::bench_text::load(&a.silesia.join("dickens.bz2"))?;
        let mut wiki = Vec::with_capacity(WIKI_LIKE);
        while wiki.len() < WIKI_LIKE {
            let take = (WIKI_LIKE - wiki.len()).min(dickens.len());
            wiki.extend_from_slice(&dickens[..take]);
        }
        let mut v = vec![("english-28MB".to_string(), wiki)];
        for f in ["dickens", "xml", "reymont", "nci"] {
            v.push((
                f.to_string(),
                super::bench_text::load(&a.silesia.join(format!("{f}.bz2")))?,
            ));
        }
        v
    } else {
        a.files
            .iter()
            .map(|p| Ok((name(p), super::bench_text::load(p)?)))
            .collect::<Result<_>>()?
    };
    if a.runs == 0 {
        bail!("--runs must be at least 1");
    }
    outln!("{}", gpu.info());
    let mut t = Table::new(
        &[
            "file",
            "coder",
            "size",
            "ratio",
            "CPU ms",
            "GPU e2e ms",
            "kernel ms",
            "kernel GB/s",
            "e2e GB/s",
            "GPU/CPU",
            "same bytes",
        ],
        2,
    );
    for (name, data) in &inputs {
        for plan in ["chardict16", "chartable"] {
            let m = measure(&gpu, data, plan, a.runs)
                .with_context(|| format!("{name}: {plan} on the GPU"))?;
            let gb = |ms: f64| data.len() as f64 / (ms * 1e6);
            t.row(vec![
                name.clone(),
                plan.to_string(),
                bytes(m.size as u64),
                format!("{:.3}", m.size as f64 / data.len().max(1) as f64),
                format!("{:.2}", m.cpu_ms),
                format!("{:.2}", m.e2e_ms),
                format!("{:.3}", m.kernel_ms),
                format!("{:.1}", gb(m.kernel_ms)),
                format!("{:.1}", gb(m.e2e_ms)),
                format!("{:.1}x", m.cpu_ms / m.e2e_ms),
                if m.same { "yes" } else { "NO" }.to_string(),
            ]);
        }
    }
    out!("{}", t.render());
    outln!(
        "CPU: the encoder on {} threads, wall time; GPU e2e: host bytes to host node (pinned \
         staging, copies both ways, kernels); kernel: CUDA events over the three kernels",
        rayon::current_num_threads()
    );
    Ok(())
}

fn name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().trim_end_matches(".bz2").to_string())
        .unwrap_or_default()
}

struct Measured {
    size: usize,
    cpu_ms: f64,
    e2e_ms: f64,
    kernel_ms: f64,
    same: bool,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn measure(gpu: &zipflow_cuda::Gpu, data: &[u8], plan: &str, runs: usize) -> Result<Measured> {
    let plan: Plan = plan.parse()?;
    let values = Values::Int(IntVec::U8(data.to_vec()));
    let mut cpu = Vec::new();
    let mut node = None;
    for _ in 0..runs {
        let t = Instant::now();
        let n = zipflow_encodings::encode(&plan, &values)?;
        cpu.push(t.elapsed().as_secs_f64() * 1e3);
        node = Some(n);
    }
    let cpu_bytes = node.context("no CPU run")?.to_bytes()?;
    let coder = if plan.name == "chartable" {
        TextCoder::CharTable(TableChoice::of_node(&NodeView::parse(&cpu_bytes)?)?)
    } else {
        TextCoder::CharDict16
    };
    // One untimed run compiles (or loads) the kernels.
    let first = encode_text(gpu, data, &coder)?;
    let same = first.node.to_bytes()? == cpu_bytes;
    let (mut e2e, mut kernel) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let t = Instant::now();
        let r = encode_text(gpu, data, &coder)?;
        e2e.push(t.elapsed().as_secs_f64() * 1e3);
        kernel.push(f64::from(r.times.kernel_ms));
    }
    Ok(Measured {
        size: cpu_bytes.len(),
        cpu_ms: median(cpu),
        e2e_ms: median(e2e),
        kernel_ms: median(kernel),
        same,
    })
}
