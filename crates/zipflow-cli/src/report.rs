//! Plain-text tables and human-readable figures for the command's output, and SVG charts.

pub mod chart;

/// A table printed with aligned columns: the first column left-aligned, the rest right.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    left: usize,
}

impl Table {
    /// A table with these column titles; the first `left` columns are left-aligned.
    pub fn new(header: &[&str], left: usize) -> Table {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
            left,
        }
    }

    /// Adds a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Renders the table.
    pub fn render(&self) -> String {
        let ncol = self.header.len();
        let mut width = vec![0usize; ncol];
        for r in std::iter::once(&self.header).chain(&self.rows) {
            for (w, c) in width.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |r: &Vec<String>| {
            let mut s = String::new();
            for (i, (c, w)) in r.iter().zip(&width).enumerate() {
                if i > 0 {
                    s.push_str("  ");
                }
                if i < self.left {
                    s.push_str(&format!("{c:<w$}"));
                } else {
                    s.push_str(&format!("{c:>w$}"));
                }
            }
            s.trim_end().to_string() + "\n"
        };
        let mut out = line(&self.header);
        out.push_str(&line(
            &width.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>(),
        ));
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }
}

/// Bytes in MB (10^6), or KB / B for small sizes.
pub fn bytes(n: u64) -> String {
    if n >= 1_000_000 {
        format!("{:.1} MB", n as f64 / 1e6)
    } else if n >= 1_000 {
        format!("{:.1} KB", n as f64 / 1e3)
    } else {
        format!("{n} B")
    }
}

/// Bytes per second as GB/s or MB/s.
pub fn speed(bytes: u64, secs: f64) -> String {
    if secs <= 0.0 {
        return "-".into();
    }
    let bps = bytes as f64 / secs;
    if bps >= 1e9 {
        format!("{:.2} GB/s", bps / 1e9)
    } else {
        format!("{:.0} MB/s", bps / 1e6)
    }
}

/// A ratio `plain / compressed`.
pub fn ratio(plain: u64, compressed: u64) -> String {
    if compressed == 0 {
        return "-".into();
    }
    format!("{:.2}", plain as f64 / compressed as f64)
}
