//! Wall-clock medians, with the process CPU time alongside to show a run kept to one thread.

use anyhow::Result;
use std::time::Instant;

/// What timing `runs` calls of one closure gave.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Median wall-clock seconds of one call.
    pub median_secs: f64,
    /// Process CPU seconds (user + system, all threads) over wall seconds, summed over all
    /// calls: about 1.0 for work on one thread. `None` where `/proc/self/stat` is unreadable.
    pub cpu_per_wall: Option<f64>,
}

impl Timing {
    /// Plain bytes per second, in GB/s (10^9).
    pub fn gbps(&self, plain_bytes: u64) -> f64 {
        plain_bytes as f64 / self.median_secs.max(1e-12) / 1e9
    }
}

/// Calls `f` `runs` times (at least once) and returns the median wall time.
pub fn measure(runs: usize, mut f: impl FnMut() -> Result<()>) -> Result<Timing> {
    let runs = runs.max(1);
    let mut secs = Vec::with_capacity(runs);
    let cpu_start = process_cpu_secs();
    let wall_start = Instant::now();
    for _ in 0..runs {
        let t = Instant::now();
        f()?;
        secs.push(t.elapsed().as_secs_f64());
    }
    let wall = wall_start.elapsed().as_secs_f64();
    let cpu_per_wall = match (cpu_start, process_cpu_secs()) {
        (Some(a), Some(b)) if wall > 0.0 => Some((b - a) / wall),
        _ => None,
    };
    secs.sort_by(f64::total_cmp);
    Ok(Timing {
        median_secs: secs[runs / 2],
        cpu_per_wall,
    })
}

/// User + system CPU seconds of this process, from `/proc/self/stat` (fields 14 and 15, in
/// USER_HZ ticks, which the Linux ABI fixes at 100 per second).
fn process_cpu_secs() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces; the fields after it start at field 3.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}
