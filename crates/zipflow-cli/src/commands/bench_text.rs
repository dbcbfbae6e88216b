//! `zipflow bench text`: text plans against gzip, zstd and bzip2 on the same files, one run.

use crate::out::{out, outln};
use crate::report::{Table, bytes};
use anyhow::{Context, Result, bail};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;
use zipflow_core::{IntVec, Plan, Values};
use zipflow_encodings::{NodeView, Scratch};
use zipflow_format::text::TEXT_CHUNK_BYTES;

/// Arguments of `zipflow bench text`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Files to compress; .bz2 files are unpacked first. Default: the Silesia files dickens,
    /// xml, reymont and nci from ../shared/data/silesia.
    pub files: Vec<PathBuf>,
    /// Plans to measure besides the automatic choice (repeatable). Default: chardict16,
    /// chartable, ans, fsst, fsst(codes: ans), words.
    #[arg(long = "plan", value_name = "PLAN")]
    pub plans: Vec<String>,
    /// Decode runs per plan; the median is reported.
    #[arg(long, default_value_t = 7)]
    pub runs: usize,
    /// Leave out gzip, zstd and bzip2.
    #[arg(long)]
    pub no_external: bool,
    /// Bytes per chunk (each chunk is encoded alone, as in a file).
    #[arg(long, default_value_t = TEXT_CHUNK_BYTES)]
    pub chunk_bytes: usize,
}

const DEFAULT_PLANS: &[&str] = &[
    "chardict16",
    "chartable",
    "ans",
    "fsst",
    "fsst(codes: ans)",
    "words",
];

const SILESIA: &[&str] = &["dickens", "xml", "reymont", "nci"];

/// Runs `zipflow bench text`.
pub fn run(a: Args) -> Result<()> {
    let files = if a.files.is_empty() {
        let dir = Path::new("../shared/data/silesia");
        SILESIA
            .iter()
            .map(|f| dir.join(format!("{f}.bz2")))
            .collect()
    } else {
        a.files.clone()
    };
    let plans: Vec<(String, Option<Plan>)> = std::iter::once(("auto".to_string(), None))
        .chain(
            if a.plans.is_empty() {
                DEFAULT_PLANS.iter().map(|s| s.to_string()).collect()
            } else {
                a.plans.clone()
            }
            .into_iter()
            .map(|p| {
                let plan = p.parse::<Plan>().with_context(|| format!("--plan `{p}`"));
                plan.map(|plan| (p, Some(plan)))
            })
            .collect::<Result<Vec<_>>>()?,
        )
        .collect();
    // Per core: one thread for everything zipflow times here.
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    let mut t = Table::new(
        &[
            "file",
            "codec",
            "size",
            "ratio",
            "encode MB/s",
            "decode MB/s",
            "plan",
        ],
        2,
    );
    for path in &files {
        let data = load(path)?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().trim_end_matches(".bz2").to_string())
            .unwrap_or_default();
        if !crate::out::quiet() {
            eprintln!("{name}: {}", bytes(data.len() as u64));
        }
        for (label, plan) in &plans {
            let chunk = a.chunk_bytes.clamp(1, TEXT_CHUNK_BYTES);
            match pool.install(|| measure(&data, plan.as_ref(), a.runs.max(1), chunk)) {
                Ok(m) => t.row(vec![
                    name.clone(),
                    format!("zipflow {label}"),
                    bytes(m.size as u64),
                    format!("{:.3}", m.size as f64 / data.len() as f64),
                    format!("{:.0}", mbs(data.len(), m.encode_s)),
                    format!("{:.0}", mbs(data.len(), m.decode_s)),
                    m.plan,
                ]),
                Err(e) => t.row(vec![
                    name.clone(),
                    format!("zipflow {label}"),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    format!("error: {e}"),
                ]),
            }
        }
        if !a.no_external {
            for (tool, level) in [
                ("gzip", "-9"),
                ("zstd", "-3"),
                ("zstd", "-19"),
                ("bzip2", "-9"),
            ] {
                match external(tool, level, &data, a.runs.clamp(1, 3)) {
                    Ok((size, enc, dec)) => t.row(vec![
                        name.clone(),
                        format!("{tool} {level}"),
                        bytes(size as u64),
                        format!("{:.3}", size as f64 / data.len() as f64),
                        format!("{:.0}", mbs(data.len(), enc)),
                        format!("{:.0}", mbs(data.len(), dec)),
                        "(process, incl. start-up)".into(),
                    ]),
                    Err(e) => eprintln!("{tool} {level}: {e:#}"),
                }
            }
        }
    }
    out!("{}", t.render());
    outln!(
        "ratio = compressed / original (node trees without the file's index); zipflow timed \
         in process on one thread, decode median of {} runs into a reused buffer",
        a.runs.max(1)
    );
    Ok(())
}

fn mbs(n: usize, secs: f64) -> f64 {
    n as f64 / secs.max(1e-9) / 1e6
}

/// The file's bytes, unpacked first if it ends in .bz2.
/// The bytes of `path`, unpacked with `bzip2 -dc` when it is a .bz2 file.
pub(crate) fn load(path: &Path) -> Result<Vec<u8>> {
    if path.extension().is_some_and(|e| e == "bz2") {
        let out = Command::new("bzip2")
            .arg("-dc")
            .arg(path)
            .output()
            .with_context(|| format!("{}: running bzip2 -dc", path.display()))?;
        if !out.status.success() {
            bail!(
                "{}: bzip2 -dc failed: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        return Ok(out.stdout);
    }
    std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))
}

struct Measured {
    size: usize,
    encode_s: f64,
    decode_s: f64,
    plan: String,
}

fn measure(data: &[u8], plan: Option<&Plan>, runs: usize, chunk: usize) -> Result<Measured> {
    let start = Instant::now();
    let mut trees = Vec::new();
    let mut plans = Vec::new();
    for chunk in data.chunks(chunk) {
        let values = Values::Int(IntVec::U8(chunk.to_vec()));
        let node = match plan {
            Some(p) => zipflow_encodings::encode(p, &values)?,
            None => {
                zipflow_select::choose_among_and_encode(
                    &values,
                    &zipflow_select::text_candidates(),
                    true,
                )?
                .1
            }
        };
        trees.push(node.to_bytes()?);
    }
    let encode_s = start.elapsed().as_secs_f64();
    for t in &trees {
        plans.push(zipflow_encodings::describe(&NodeView::parse(t)?)?.to_string());
    }
    plans.dedup();
    let mut scratch = Scratch::default();
    let mut out = Values::Int(IntVec::U8(Vec::new()));
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        let mut n = 0;
        for t in &trees {
            let node = NodeView::parse(t)?;
            zipflow_encodings::decode(&node, &mut out, &mut scratch)?;
            n += out.len();
        }
        times.push(start.elapsed().as_secs_f64());
        if n != data.len() {
            bail!("decoded {n} bytes, expected {}", data.len());
        }
    }
    // Check the bytes once (outside the timed runs).
    let mut back = Vec::with_capacity(data.len());
    for t in &trees {
        let node = NodeView::parse(t)?;
        zipflow_encodings::decode(&node, &mut out, &mut scratch)?;
        if let Values::Int(IntVec::U8(b)) = &out {
            back.extend_from_slice(b);
        }
    }
    if back != data {
        bail!("round trip differs");
    }
    times.sort_by(f64::total_cmp);
    Ok(Measured {
        size: trees.iter().map(Vec::len).sum(),
        encode_s,
        decode_s: times[times.len() / 2],
        plan: plans.join("; "),
    })
}

/// Compressed size, compress seconds and median decompress seconds of `tool level`.
fn external(tool: &str, level: &str, data: &[u8], runs: usize) -> Result<(usize, f64, f64)> {
    let start = Instant::now();
    let packed = pipe(tool, &[level, "-c"], data)?;
    let enc = start.elapsed().as_secs_f64();
    let mut times = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        let back = pipe(tool, &["-d", "-c"], &packed)?;
        times.push(start.elapsed().as_secs_f64());
        if back != data {
            bail!("{tool} round trip differs");
        }
    }
    times.sort_by(f64::total_cmp);
    Ok((packed.len(), enc, times[times.len() / 2]))
}

fn pipe(tool: &str, args: &[&str], input: &[u8]) -> Result<Vec<u8>> {
    let mut child = Command::new(tool)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("running {tool}"))?;
    let mut stdin = child.stdin.take().context("stdin")?;
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output()?;
    writer
        .join()
        .map_err(|_| anyhow::anyhow!("{tool}: writer thread panicked"))??;
    if !out.status.success() {
        bail!("{tool} {} failed", args.join(" "));
    }
    Ok(out.stdout)
}
