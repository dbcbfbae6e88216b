//! SVG charts of benchmark results: a labelled scatter (one point per measured thing, several
//! series, optional log axes) and grouped bars (categories × series).
//!
//! Charts are drawn with plotters' SVG backend and no font files: text goes into the SVG as
//! `<text>` elements in a generic sans-serif face, placed with estimated widths, so the output
//! is the same on every machine. Each chart is written to a temporary file beside its target
//! and renamed onto it when complete.
//!
//! ```ignore
//! let chart = Scatter {
//!     title: "decode speed against ratio".into(),
//!     x_desc: "compression ratio".into(),
//!     y_desc: "GB/s".into(),
//!     log_x: true,
//!     log_y: false,
//!     series: vec![Series { name: "zipflow".into(), points: vec![Point::labelled(6.8, 2.7, "all")] }],
//! };
//! chart.write(Path::new("chart.svg"))?;
//! ```

use crate::io::AtomicFile;
use anyhow::{Context, Result, anyhow, bail};
use plotters::coord::ranged1d::{
    AsRangedCoord, DefaultFormatting, KeyPointHint, Ranged, ValueFormatter,
};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::io::Write;
use std::path::Path;

/// Width and height of every chart, in pixels.
const SIZE: (u32, u32) = (1000, 620);
/// Colours of the series, in order (a colour-blind safe set).
const COLOURS: [RGBColor; 6] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(213, 94, 0),
];
/// The font of every text; with no font files, plotters estimates its widths.
const FONT: &str = "sans-serif";

/// One point of a scatter.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Horizontal value.
    pub x: f64,
    /// Vertical value.
    pub y: f64,
    /// Text written beside the point.
    pub label: Option<String>,
}

impl Point {
    /// A point with a label.
    pub fn labelled(x: f64, y: f64, label: impl Into<String>) -> Point {
        Point {
            x,
            y,
            label: Some(label.into()),
        }
    }
}

/// A named set of points, drawn in one colour and named in the legend.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The legend's name for the series.
    pub name: String,
    /// Its points.
    pub points: Vec<Point>,
}

/// A scatter of labelled points in one or more series.
#[derive(Debug, Clone, PartialEq)]
pub struct Scatter {
    /// The caption above the chart.
    pub title: String,
    /// The horizontal axis' description.
    pub x_desc: String,
    /// The vertical axis' description.
    pub y_desc: String,
    /// A logarithmic horizontal axis (every x must then be positive).
    pub log_x: bool,
    /// A logarithmic vertical axis (every y must then be positive).
    pub log_y: bool,
    /// The series, in legend order.
    pub series: Vec<Series>,
}

/// One series of a bar chart: a value per category, `None` where it was not measured.
#[derive(Debug, Clone, PartialEq)]
pub struct BarSeries {
    /// The legend's name for the series.
    pub name: String,
    /// One value per category of the chart.
    pub values: Vec<Option<f64>>,
}

/// Grouped bars: for each category one bar per series, the value written above each bar.
#[derive(Debug, Clone, PartialEq)]
pub struct Bars {
    /// The caption above the chart.
    pub title: String,
    /// The vertical axis' description.
    pub y_desc: String,
    /// The groups along the horizontal axis.
    pub categories: Vec<String>,
    /// The series, in legend order and in bar order within each group.
    pub series: Vec<BarSeries>,
}

/// A value as axis and bar labels show it: at most three significant digits for small values,
/// whole numbers with thousands separators from 100 up.
pub fn number(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 || a == 0.0 {
        let whole = format!("{:.0}", a);
        let mut grouped = String::new();
        for (i, c) in whole.chars().enumerate() {
            if i > 0 && (whole.len() - i) % 3 == 0 {
                grouped.push(',');
            }
            grouped.push(c);
        }
        if v < 0.0 {
            format!("-{grouped}")
        } else {
            grouped
        }
    } else if a >= 10.0 {
        trim_zeros(format!("{v:.1}"))
    } else if a >= 1.0 {
        trim_zeros(format!("{v:.2}"))
    } else {
        trim_zeros(format!("{v:.3}"))
    }
}

fn trim_zeros(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// The range an axis shows for `values`: a margin on each side, in the log domain when `log`.
fn axis_range(values: impl Iterator<Item = f64>, log: bool) -> Result<std::ops::Range<f64>> {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values {
        if !v.is_finite() {
            bail!("cannot plot the value {v}");
        }
        if log && v <= 0.0 {
            bail!("cannot plot {v} on a logarithmic axis");
        }
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        bail!("no points to plot");
    }
    Ok(if log {
        lo / 1.3..hi * 1.3
    } else {
        let pad = if hi > lo {
            (hi - lo) * 0.08
        } else {
            hi.abs().max(1.0) * 0.1
        };
        // Speeds, sizes and times are measured from zero.
        let start = if lo >= 0.0 { 0.0 } else { lo - pad };
        start..hi + pad
    })
}

/// Writes `svg` to `path` through a temporary file renamed onto it (replacing an older chart).
fn write_atomically(path: &Path, svg: &str) -> Result<()> {
    let (target, mut file) = AtomicFile::create(path, true)?;
    file.write_all(svg.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("{}: cannot write", path.display()))?;
    target.commit()
}

/// A plotters error as an anyhow error naming the chart (plotters' errors borrow nothing, but
/// their type carries the backend's).
fn drawing<E: std::fmt::Display>(what: &str) -> impl Fn(E) -> anyhow::Error + '_ {
    move |e| anyhow!("drawing the chart `{what}`: {e}")
}

impl Scatter {
    /// Draws the chart as an SVG document.
    pub fn render(&self) -> Result<String> {
        let points = || self.series.iter().flat_map(|s| &s.points);
        let xr = axis_range(points().map(|p| p.x), self.log_x)?;
        let yr = axis_range(points().map(|p| p.y), self.log_y)?;
        match (self.log_x, self.log_y) {
            (false, false) => self.render_in(xr, yr),
            (true, false) => self.render_in(xr.log_scale(), yr),
            (false, true) => self.render_in(xr, yr.log_scale()),
            (true, true) => self.render_in(xr.log_scale(), yr.log_scale()),
        }
    }

    /// Draws the chart with the axes `x` and `y` (linear or logarithmic).
    fn render_in<X, Y>(&self, x: X, y: Y) -> Result<String>
    where
        X: AsRangedCoord<Value = f64>,
        X::CoordDescType: ValueFormatter<f64>,
        Y: AsRangedCoord<Value = f64>,
        Y::CoordDescType: ValueFormatter<f64>,
    {
        let err = drawing(&self.title);
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
            root.fill(&WHITE).map_err(&err)?;
            let mut chart = ChartBuilder::on(&root)
                .caption(&self.title, (FONT, 22))
                .margin(16)
                .x_label_area_size(48)
                .y_label_area_size(64)
                .build_cartesian_2d(x, y)
                .map_err(&err)?;
            chart
                .configure_mesh()
                .x_desc(self.x_desc.as_str())
                .y_desc(self.y_desc.as_str())
                .x_label_formatter(&|v| number(*v))
                .y_label_formatter(&|v| number(*v))
                .label_style((FONT, 14))
                .axis_desc_style((FONT, 15))
                .light_line_style(WHITE)
                .draw()
                .map_err(&err)?;
            for (i, s) in self.series.iter().enumerate() {
                let colour = COLOURS[i % COLOURS.len()];
                let label_style = TextStyle::from((FONT, 12).into_font()).color(&colour);
                chart
                    .draw_series(s.points.iter().map(|p| {
                        EmptyElement::at((p.x, p.y))
                            + Circle::new((0, 0), 5, colour.filled())
                            + Text::new(
                                p.label.clone().unwrap_or_default(),
                                (7, -14),
                                label_style.clone(),
                            )
                    }))
                    .map_err(&err)?
                    .label(s.name.as_str())
                    .legend(move |(x, y)| Circle::new((x + 10, y), 5, colour.filled()));
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .label_font((FONT, 14))
                .background_style(WHITE.mix(0.9))
                .border_style(BLACK.mix(0.4))
                .draw()
                .map_err(&err)?;
            root.present().map_err(&err)?;
        }
        Ok(svg)
    }

    /// Draws the chart into the SVG file `path`.
    pub fn write(&self, path: &Path) -> Result<()> {
        write_atomically(path, &self.render()?)
    }
}

/// The horizontal axis of a bar chart: category `i` spans `[i, i + 1)` and its name is the
/// tick at its centre.
struct CategoryAxis {
    n: usize,
}

impl Ranged for CategoryAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = f64::from(limit.1 - limit.0);
        limit.0 + (value / self.n as f64 * span).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
        (0..self.n).map(|i| i as f64 + 0.5).collect()
    }

    fn range(&self) -> std::ops::Range<f64> {
        0.0..self.n as f64
    }
}

impl Bars {
    /// Draws the chart as an SVG document.
    pub fn render(&self) -> Result<String> {
        let n = self.categories.len();
        if n == 0 || self.series.is_empty() {
            bail!("the chart `{}` has no bars to draw", self.title);
        }
        if let Some(s) = self.series.iter().find(|s| s.values.len() != n) {
            bail!(
                "the chart `{}`: series `{}` has {} values for {n} categories",
                self.title,
                s.name,
                s.values.len()
            );
        }
        let values = self.series.iter().flat_map(|s| s.values.iter().flatten());
        let top = axis_range(values.copied().chain([0.0]), false)?.end * 1.08;
        let err = drawing(&self.title);
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
            root.fill(&WHITE).map_err(&err)?;
            let mut chart = ChartBuilder::on(&root)
                .caption(&self.title, (FONT, 22))
                .margin(16)
                .x_label_area_size(40)
                .y_label_area_size(72)
                .build_cartesian_2d(CategoryAxis { n }, 0.0..top)
                .map_err(&err)?;
            let name = |v: &f64| {
                let i = v.floor();
                if i >= 0.0 && (i as usize) < n {
                    self.categories[i as usize].clone()
                } else {
                    String::new()
                }
            };
            chart
                .configure_mesh()
                .disable_x_mesh()
                .y_desc(self.y_desc.as_str())
                .x_label_formatter(&name)
                .y_label_formatter(&|v| number(*v))
                .label_style((FONT, 14))
                .axis_desc_style((FONT, 15))
                .light_line_style(WHITE)
                .draw()
                .map_err(&err)?;
            let k = self.series.len() as f64;
            // Bars fill 80 % of a category, side by side in series order.
            let width = 0.8 / k;
            let value_style = TextStyle::from((FONT, 11).into_font())
                .pos(Pos::new(HPos::Center, VPos::Bottom))
                .color(&BLACK);
            for (j, s) in self.series.iter().enumerate() {
                let colour = COLOURS[j % COLOURS.len()];
                let bars = s.values.iter().enumerate().filter_map(|(i, v)| {
                    let v = (*v)?;
                    let x0 = i as f64 + 0.1 + j as f64 * width;
                    Some((x0, v))
                });
                chart
                    .draw_series(bars.clone().map(|(x0, v)| {
                        Rectangle::new([(x0, 0.0), (x0 + width * 0.92, v)], colour.filled())
                    }))
                    .map_err(&err)?
                    .label(s.name.as_str())
                    .legend(move |(x, y)| {
                        Rectangle::new([(x + 2, y - 6), (x + 16, y + 6)], colour.filled())
                    });
                chart
                    .draw_series(bars.map(|(x0, v)| {
                        Text::new(number(v), (x0 + width * 0.46, v), value_style.clone())
                    }))
                    .map_err(&err)?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .label_font((FONT, 14))
                .background_style(WHITE.mix(0.9))
                .border_style(BLACK.mix(0.4))
                .draw()
                .map_err(&err)?;
            root.present().map_err(&err)?;
        }
        Ok(svg)
    }

    /// Draws the chart into the SVG file `path`.
    pub fn write(&self, path: &Path) -> Result<()> {
        write_atomically(path, &self.render()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts of the SVG's `<text>` elements, unescaped enough for these tests.
    fn texts(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| {
                let body = t.split_once('>')?.1;
                Some(body.split_once("</text>")?.0.trim().replace("&amp;", "&"))
            })
            .collect()
    }

    #[test]
    fn scatter_writes_labels_series_and_axes() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("scatter.svg");
        let chart = Scatter {
            title: "decode speed against ratio".into(),
            x_desc: "compression ratio".into(),
            y_desc: "GB/s".into(),
            log_x: true,
            log_y: false,
            series: vec![
                Series {
                    name: "zipflow".into(),
                    points: vec![
                        Point::labelled(31.7, 5.07, "l_orderkey"),
                        Point::labelled(3.55, 15.7, "l_partkey"),
                    ],
                },
                Series {
                    name: "Parquet+zstd(3)".into(),
                    points: vec![Point::labelled(7.6, 0.6, "l_orderkey")],
                },
            ],
        };
        chart.write(&path).unwrap_or_else(|e| panic!("{e}"));
        let svg = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(svg.starts_with("<svg"), "{}", &svg[..100.min(svg.len())]);
        let t = texts(&svg);
        for want in [
            "decode speed against ratio",
            "compression ratio",
            "GB/s",
            "l_orderkey",
            "l_partkey",
            "zipflow",
            "Parquet+zstd(3)",
        ] {
            assert!(t.iter().any(|x| x == want), "no `{want}` in {t:?}");
        }
        assert_eq!(t.iter().filter(|x| *x == "l_orderkey").count(), 2);
        // One circle per point and one per legend entry.
        assert_eq!(svg.matches("<circle").count(), 3 + 2);
        // Nothing but the chart is left in the directory.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap_or_else(|e| panic!("{e}"))
            .filter_map(|e| e.ok().map(|e| e.file_name()))
            .collect();
        assert_eq!(names, ["scatter.svg"]);
    }

    #[test]
    fn scatter_refuses_non_positive_values_on_a_log_axis() {
        let chart = Scatter {
            title: "t".into(),
            x_desc: "x".into(),
            y_desc: "y".into(),
            log_x: false,
            log_y: true,
            series: vec![Series {
                name: "s".into(),
                points: vec![Point::labelled(1.0, 0.0, "zero")],
            }],
        };
        let e = chart.render().err().map(|e| e.to_string());
        assert!(
            e.as_deref().is_some_and(|e| e.contains("logarithmic axis")),
            "{e:?}"
        );
    }

    #[test]
    fn bars_write_categories_series_and_values() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("bars.svg");
        let chart = Bars {
            title: "Q1 and Q6".into(),
            y_desc: "ms".into(),
            categories: vec!["Q1, 1 thread".into(), "Q6, 1 thread".into()],
            series: vec![
                BarSeries {
                    name: "DuckDB".into(),
                    values: vec![Some(301.8), Some(34.3)],
                },
                BarSeries {
                    name: "zipflow".into(),
                    values: vec![Some(65.5), None],
                },
            ],
        };
        chart.write(&path).unwrap_or_else(|e| panic!("{e}"));
        let svg = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
        let t = texts(&svg);
        for want in [
            "Q1 and Q6",
            "Q1, 1 thread",
            "Q6, 1 thread",
            "DuckDB",
            "zipflow",
            "302",
            "34.3",
            "65.5",
        ] {
            assert!(t.iter().any(|x| x == want), "no `{want}` in {t:?}");
        }
        let short = Bars {
            series: vec![BarSeries {
                name: "x".into(),
                values: vec![Some(1.0)],
            }],
            ..chart
        };
        assert!(short.render().is_err());
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(number(2546.4), "2,546");
        assert_eq!(number(1234567.0), "1,234,567");
        assert_eq!(number(301.8), "302");
        assert_eq!(number(34.3), "34.3");
        assert_eq!(number(5.07), "5.07");
        assert_eq!(number(2.0), "2");
        assert_eq!(number(0.598), "0.598");
        assert_eq!(number(0.0), "0");
    }
}
