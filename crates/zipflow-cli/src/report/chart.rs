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
//!     subtitle: Some("TPC-H lineitem SF 1, one thread".into()),
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
use plotters::coord::Shift;
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
    /// A smaller line under the caption: what was measured, where, when.
    pub subtitle: Option<String>,
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
    /// A smaller line under the caption: what was measured, where, when.
    pub subtitle: Option<String>,
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

/// The legend of a chart's series, at its upper right over a light background; `err` names
/// the chart in an error.
fn draw_legend<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    err: &impl Fn(DrawingAreaErrorKind<DB::ErrorType>) -> anyhow::Error,
) -> Result<()>
where
    DB: DrawingBackend + 'a,
    CT: CoordTranslate,
{
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.4))
        .draw()
        .map_err(err)
}

/// Round values for the ticks of a logarithmic axis over `range`: 1, 2 and 5 times the powers
/// of ten, with 3 and 7 too where that gives fewer than four.
fn log_ticks(range: &std::ops::Range<f64>) -> Vec<f64> {
    // `axis_range` gives a log axis positive, finite bounds; anything else gets no ticks.
    if !(range.start > 0.0 && range.end.is_finite() && range.start < range.end) {
        return Vec::new();
    }
    let ticks = |steps: &[f64]| -> Vec<f64> {
        let (lo, hi) = (
            range.start.log10().floor() as i32,
            range.end.log10().ceil() as i32,
        );
        (lo..=hi)
            .flat_map(|e| steps.iter().map(move |m| m * 10f64.powi(e)))
            .filter(|v| range.contains(v))
            .collect()
    };
    let coarse = ticks(&[1.0, 2.0, 5.0]);
    if coarse.len() >= 4 {
        coarse
    } else {
        ticks(&[1.0, 2.0, 3.0, 5.0, 7.0])
    }
}

/// Estimated width in pixels of `text` at [`LABEL_PX`] (the naive metrics plotters uses
/// without font files are similar).
fn label_width(text: &str) -> i32 {
    (text.chars().count() as f64 * f64::from(LABEL_PX) * 0.58).ceil() as i32
}

/// Font size of point labels, in pixels.
const LABEL_PX: i32 = 12;
/// Radius of a scatter point, in pixels.
const POINT_PX: i32 = 5;

/// A box in pixels: left, top, right, bottom.
type PixelBox = (i32, i32, i32, i32);

fn overlap(a: PixelBox, b: PixelBox) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

/// Where each label goes, as an offset of its top-left corner from its point: the first of
/// above right, below right, above left, below left, right and left that stays inside `area`
/// and overlaps neither a label placed before nor a point; else the one inside with the
/// fewest overlaps.
fn place_labels(
    points: &[(i32, i32)],
    labels: &[(usize, &str)],
    area: PixelBox,
) -> Vec<(i32, i32)> {
    let markers: Vec<PixelBox> = points
        .iter()
        .map(|&(x, y)| (x - POINT_PX, y - POINT_PX, x + POINT_PX, y + POINT_PX))
        .collect();
    let mut placed: Vec<PixelBox> = Vec::new();
    labels
        .iter()
        .map(|&(i, text)| {
            let (x, y) = points[i];
            let (w, h) = (label_width(text), LABEL_PX + 2);
            let gap = POINT_PX + 2;
            let candidates = [
                (gap, -h - 2),
                (gap, 2),
                (-gap - w, -h - 2),
                (-gap - w, 2),
                (gap, -h / 2),
                (-gap - w, -h / 2),
            ];
            let cost = |&(dx, dy): &(i32, i32)| {
                let b = (x + dx, y + dy, x + dx + w, y + dy + h);
                let outside = b.0 < area.0 || b.1 < area.1 || b.2 > area.2 || b.3 > area.3;
                let hits = placed
                    .iter()
                    .chain(&markers)
                    .filter(|&&o| overlap(b, o))
                    .count();
                usize::from(outside) * 1000 + hits
            };
            // The first candidate of least cost.
            let (dx, dy) = candidates
                .iter()
                .copied()
                .min_by_key(cost)
                .unwrap_or(candidates[0]);
            placed.push((x + dx, y + dy, x + dx + w, y + dy + h));
            (dx, dy)
        })
        .collect()
}

/// Draws the title (and the subtitle under it) across the top of `root`; returns the area
/// below for the chart.
fn header<'a>(
    root: &DrawingArea<SVGBackend<'a>, Shift>,
    title: &str,
    subtitle: Option<&str>,
) -> Result<DrawingArea<SVGBackend<'a>, Shift>> {
    let err = drawing(title);
    let centre = Pos::new(HPos::Center, VPos::Top);
    let middle = SIZE.0 as i32 / 2;
    let (head, body) = root.split_vertically(if subtitle.is_some() { 66 } else { 46 });
    head.draw(&Text::new(
        title,
        (middle, 14),
        TextStyle::from((FONT, 22).into_font()).pos(centre),
    ))
    .map_err(&err)?;
    if let Some(sub) = subtitle {
        head.draw(&Text::new(
            sub,
            (middle, 44),
            TextStyle::from((FONT, 15).into_font())
                .pos(centre)
                .color(&RGBColor(80, 80, 80)),
        ))
        .map_err(&err)?;
    }
    Ok(body)
}

/// A point label with its place: the point it belongs to and its pixel offset from it.
struct PlacedLabel {
    series: usize,
    x: f64,
    y: f64,
    text: String,
    offset: (i32, i32),
}

impl Scatter {
    /// Draws the chart as an SVG document.
    pub fn render(&self) -> Result<String> {
        let points = || self.series.iter().flat_map(|s| &s.points);
        let xr = axis_range(points().map(|p| p.x), self.log_x)?;
        let yr = axis_range(points().map(|p| p.y), self.log_y)?;
        let log = |r: std::ops::Range<f64>| {
            let ticks = log_ticks(&r);
            r.log_scale().with_key_points(ticks)
        };
        match (self.log_x, self.log_y) {
            (false, false) => self.render_in(xr, yr),
            (true, false) => self.render_in(log(xr), yr),
            (false, true) => self.render_in(xr, log(yr)),
            (true, true) => self.render_in(log(xr), log(yr)),
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
            let body = header(&root, &self.title, self.subtitle.as_deref())?;
            let mut chart = ChartBuilder::on(&body)
                .margin(16)
                .margin_top(4)
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
                .max_light_lines(0)
                .draw()
                .map_err(&err)?;
            let (xs, ys) = chart.plotting_area().get_pixel_range();
            let area = (xs.start, ys.start, xs.end, ys.end);
            let labels = self.labels(|p| chart.backend_coord(&(p.x, p.y)), area);
            for (i, s) in self.series.iter().enumerate() {
                let colour = COLOURS[i % COLOURS.len()];
                chart
                    .draw_series(
                        s.points
                            .iter()
                            .map(|p| Circle::new((p.x, p.y), POINT_PX, colour.filled())),
                    )
                    .map_err(&err)?
                    .label(s.name.as_str())
                    .legend(move |(x, y)| Circle::new((x + 10, y), POINT_PX, colour.filled()));
                let style = TextStyle::from((FONT, LABEL_PX).into_font()).color(&colour);
                chart
                    .draw_series(labels.iter().filter(|l| l.series == i).map(|l| {
                        EmptyElement::at((l.x, l.y))
                            + Text::new(l.text.clone(), l.offset, style.clone())
                    }))
                    .map_err(&err)?;
            }
            draw_legend(&mut chart, &err)?;
            root.present().map_err(&err)?;
        }
        Ok(svg)
    }

    /// The point labels and where they go: points of one series drawn within a point's radius of
    /// each other share one label (their names joined), and labels avoid each other and the
    /// points where they can. `pixel` maps a point to the backend's pixels.
    /// `area` is the plotting area in pixels.
    fn labels(&self, pixel: impl Fn(&Point) -> (i32, i32), area: PixelBox) -> Vec<PlacedLabel> {
        let mut all: Vec<(usize, &Point, (i32, i32))> = Vec::new();
        for (i, s) in self.series.iter().enumerate() {
            all.extend(s.points.iter().map(|p| (i, p, pixel(p))));
        }
        // (index into `all` of the first point of a group, joined text)
        let mut groups: Vec<(usize, String)> = Vec::new();
        for (k, &(series, p, (x, y))) in all.iter().enumerate() {
            let Some(label) = p.label.as_deref().filter(|l| !l.is_empty()) else {
                continue;
            };
            let near = groups.iter_mut().find(|(g, _)| {
                let (gs, _, (gx, gy)) = all[*g];
                gs == series && (gx - x).abs() <= POINT_PX && (gy - y).abs() <= POINT_PX
            });
            match near {
                Some((_, text)) => {
                    text.push_str(", ");
                    text.push_str(label);
                }
                None => groups.push((k, label.to_string())),
            }
        }
        let pixels: Vec<(i32, i32)> = all.iter().map(|a| a.2).collect();
        let order: Vec<(usize, &str)> = groups.iter().map(|(k, t)| (*k, t.as_str())).collect();
        let offsets = place_labels(&pixels, &order, area);
        groups
            .iter()
            .zip(offsets)
            .map(|((k, text), offset)| PlacedLabel {
                series: all[*k].0,
                x: all[*k].1.x,
                y: all[*k].1.y,
                text: text.clone(),
                offset,
            })
            .collect()
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
        // Headroom for the values above the bars and the legend.
        let top = axis_range(values.copied().chain([0.0]), false)?.end * 1.15;
        let err = drawing(&self.title);
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
            root.fill(&WHITE).map_err(&err)?;
            let body = header(&root, &self.title, self.subtitle.as_deref())?;
            let mut chart = ChartBuilder::on(&body)
                .margin(16)
                .margin_top(4)
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
                .max_light_lines(0)
                .draw()
                .map_err(&err)?;
            let k = self.series.len() as f64;
            // Bars fill 80 % of a category, side by side in series order.
            let width = 0.8 / k;
            let value_style = TextStyle::from((FONT, 12).into_font())
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
            draw_legend(&mut chart, &err)?;
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
            subtitle: Some("SF 1, one thread".into()),
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
            "SF 1, one thread",
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
            subtitle: None,
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
            subtitle: None,
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
    fn labels_avoid_each_other_and_stay_inside() {
        let area = (0, 0, 400, 300);
        // Two points side by side: the second label goes elsewhere than the first.
        let offsets = place_labels(&[(100, 100), (100, 104)], &[(0, "aaaa"), (1, "bbbb")], area);
        assert_eq!(offsets[0], (7, -16));
        assert_ne!(offsets[1], offsets[0]);
        // A point at the top right corner: its label goes below left, inside the area.
        let offsets = place_labels(&[(395, 5)], &[(0, "a long label")], area);
        let (dx, dy) = offsets[0];
        assert!(
            395 + dx >= 0 && 395 + dx + label_width("a long label") <= 400,
            "{dx}"
        );
        assert!(5 + dy >= 0, "{dy}");
    }

    #[test]
    fn log_ticks_are_round() {
        assert_eq!(log_ticks(&(2.0..80.0)), [2.0, 5.0, 10.0, 20.0, 50.0]);
        assert_eq!(log_ticks(&(1.5..9.0)), [2.0, 3.0, 5.0, 7.0]);
        assert!(log_ticks(&(0.0..9.0)).is_empty());
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
