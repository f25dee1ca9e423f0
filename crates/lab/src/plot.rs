//! SVG figures (plotters): grids of panels, each with one curve per series (an ECDF, a line
//! over a swept parameter, a time series), marks without a line (events on a timeline), and
//! reference values as dashed lines. The
//! reproductions and `qfec lab plot` draw with it.

use std::path::Path;

use plotters::prelude::*;

/// One curve.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// A horizontal or vertical reference line with its label (a value the paper reports).
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    pub label: String,
    /// `Some(y)`: horizontal at y; otherwise vertical at `x`.
    pub y: Option<f64>,
    pub x: f64,
}

/// One box of a box plot: quartiles, median, and whiskers to the extremes.
#[derive(Debug, Clone, PartialEq)]
pub struct BoxStat {
    pub label: String,
    pub min: f64,
    pub q1: f64,
    pub median: f64,
    pub q3: f64,
    pub max: f64,
}

impl BoxStat {
    /// The box of sample `xs` (NaNs ignored); None if empty.
    pub fn of(label: &str, xs: &[f64]) -> Option<BoxStat> {
        let mut v: Vec<f64> = xs.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let q = |p| crate::metrics::quantile(&v, p);
        Some(BoxStat {
            label: label.into(),
            min: v[0],
            q1: q(0.25),
            median: q(0.5),
            q3: q(0.75),
            max: v[v.len() - 1],
        })
    }
}

/// One panel of a figure: curves, or (if `boxes` is not empty) a box plot with one box per
/// category along the x axis.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Panel {
    pub title: String,
    pub series: Vec<Series>,
    pub references: Vec<Reference>,
    pub boxes: Vec<BoxStat>,
    /// Events drawn without a line, over the series.
    pub marks: Vec<Marks>,
}

/// How [`Marks`] show their points.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MarkShape {
    /// A small hollow circle at each point.
    #[default]
    Circle,
    /// A vertical line over the panel's height at each point's x (its y is ignored).
    Bar,
}

/// Points drawn as marks, in the colour of `variant` (grey when `None`): the same variant
/// keeps the same colour as in the figures' curves.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Marks {
    pub label: String,
    pub variant: Option<String>,
    pub shape: MarkShape,
    pub points: Vec<(f64, f64)>,
}

/// A figure: panels on a grid with shared axis labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub panels: Vec<Panel>,
    pub columns: usize,
    /// Fixed x range (otherwise from the data).
    pub x_range: Option<(f64, f64)>,
    pub y_range: Option<(f64, f64)>,
    /// Where the legend goes: where the curves leave room.
    pub legend: Corner,
}

impl Figure {
    /// A figure of one untitled panel, ranges from the data.
    pub fn single(
        title: String,
        x_label: &str,
        y_label: &str,
        panel: Panel,
        legend: Corner,
    ) -> Self {
        Figure {
            title,
            x_label: x_label.into(),
            y_label: y_label.into(),
            panels: vec![panel],
            columns: 1,
            x_range: None,
            y_range: None,
            legend,
        }
    }
}

/// A corner of a panel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Corner {
    /// Where ECDFs leave room.
    LowerRight,
    UpperRight,
    /// Where rising curves leave room.
    UpperLeft,
}

/// The empirical CDF of `xs` as step points.
pub fn ecdf(xs: &[f64]) -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    let mut out = Vec::with_capacity(2 * v.len());
    for (i, x) in v.iter().enumerate() {
        out.push((*x, i as f64 / n));
        out.push((*x, (i + 1) as f64 / n));
    }
    out
}

/// One colour per variant, in every figure of every reproduction: a series whose label
/// names a known variant (before any " / ", as in "rlc / quic") takes this colour; any other
/// takes [`COLORS`] by its position.
const VARIANT_COLORS: [(&str, RGBColor); 31] = [
    ("quic", RGBColor(0, 0, 0)),
    ("udp", RGBColor(127, 127, 127)),
    ("rquic", RGBColor(214, 39, 40)),
    ("rquic-ss-off", RGBColor(255, 152, 150)),
    ("rquic-paper", RGBColor(140, 86, 75)),
    ("rquic/signal", RGBColor(196, 156, 148)),
    ("rquic-paper/signal", RGBColor(227, 119, 194)),
    ("adaptive", RGBColor(31, 119, 180)),
    ("adaptive/signal", RGBColor(31, 119, 180)),
    ("adaptive/mask", RGBColor(57, 59, 121)),
    ("bbr", RGBColor(44, 160, 44)),
    ("bbr+adaptive", RGBColor(148, 103, 189)),
    ("rlc", RGBColor(23, 190, 207)),
    ("rlc/signal", RGBColor(23, 190, 207)),
    ("rlc/mask", RGBColor(82, 84, 163)),
    ("rlc-1/4", RGBColor(158, 218, 229)),
    ("rs", RGBColor(188, 189, 34)),
    ("xor", RGBColor(255, 127, 14)),
    ("quic+rlc", RGBColor(140, 86, 75)),
    ("bquic", RGBColor(214, 39, 40)),
    ("af", RGBColor(31, 119, 180)),
    ("af/no-pacing", RGBColor(44, 160, 44)),
    ("single", RGBColor(0, 0, 0)),
    ("rr", RGBColor(214, 39, 40)),
    ("highrb", RGBColor(31, 119, 180)),
    ("single/rlc", RGBColor(127, 127, 127)),
    ("rr/rlc", RGBColor(255, 152, 150)),
    ("fec-aware", RGBColor(44, 160, 44)),
    ("minrtt", RGBColor(148, 103, 189)),
    ("redundant", RGBColor(140, 86, 75)),
    // `qfec lab plot`'s name for the variant without FEC.
    ("none", RGBColor(0, 0, 0)),
];

/// The colour of a series labelled `label` at position `slot` (see [`VARIANT_COLORS`]).
fn colour_of(label: &str, slot: usize) -> RGBColor {
    let key = label.split(" / ").next().unwrap_or(label).trim();
    VARIANT_COLORS
        .iter()
        .find(|(name, _)| *name == key)
        .map_or(COLORS[slot % COLORS.len()], |(_, c)| *c)
}

/// Series colours by position, for series that name no known variant.
const COLORS: [RGBColor; 10] = [
    RGBColor(0, 0, 0),
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(23, 190, 207),
    RGBColor(188, 189, 34),
    RGBColor(227, 119, 194),
];

fn range_of(it: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = it
        .filter(|v| v.is_finite())
        .fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    if lo > hi {
        (0.0, 1.0)
    } else if hi - lo < 0.1 * (hi + lo).abs() / 2.0 || hi - lo < 1e-9 {
        // A spread of a few hundredths would fill the panel with noise: show at least 10 %.
        let mid = (hi + lo) / 2.0;
        let half = (0.05 * mid.abs()).max(0.5 * (hi - lo)).max(0.05);
        (mid - half, mid + half)
    } else {
        let pad = (hi - lo) * 0.05;
        (lo - pad, hi + pad)
    }
}

/// The figure title's font size, px.
const TITLE_PX: f64 = 20.0;

/// `text` in lines of at most about `width` characters, broken between words (a word longer
/// than that stays whole).
fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(l) if l.len() + 1 + word.len() <= width.max(1) => {
                l.push(' ');
                l.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    if lines.is_empty() {
        lines.push(String::new());
    }
    lines
}

/// Draws `fig` as an SVG file.
pub fn draw(fig: &Figure, path: &Path) -> Result<(), String> {
    let cols = fig.columns.max(1);
    let rows = fig.panels.len().div_ceil(cols).max(1);
    // A lone panel gets room for its legend; a grid keeps panels small enough to compare.
    let (w, h) = if fig.panels.len() == 1 {
        (640, 480)
    } else {
        (420 * cols as u32, 330 * rows as u32 + 40)
    };
    let root = SVGBackend::new(path, (w, h)).into_drawing_area();
    let e = |e: DrawingAreaErrorKind<std::io::Error>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    // The title on as many lines as the width needs (a long context line must not run off
    // the figure's edges).
    let lines = wrap_words(&fig.title, (w as f64 / (TITLE_PX * 0.55)) as usize);
    let line_h = TITLE_PX as u32 + 6;
    let (top, root) = root.split_vertically(8 + line_h * lines.len() as u32);
    let style = ("sans-serif", TITLE_PX).into_font().color(&BLACK).pos(
        plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Center,
            plotters::style::text_anchor::VPos::Top,
        ),
    );
    for (i, line) in lines.iter().enumerate() {
        top.draw(&Text::new(
            line.as_str(),
            (w as i32 / 2, 6 + (line_h * i as u32) as i32),
            style.clone(),
        ))
        .map_err(e)?;
    }
    let areas = root.split_evenly((rows, cols));
    for (panel, area) in fig.panels.iter().zip(areas.iter()) {
        let xs = panel
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .chain(
                panel
                    .marks
                    .iter()
                    .flat_map(|m| m.points.iter().map(|p| p.0)),
            )
            .chain(
                panel
                    .references
                    .iter()
                    .filter(|r| r.y.is_none())
                    .map(|r| r.x),
            );
        let ys = panel
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .chain(
                (panel.marks.iter())
                    .filter(|m| m.shape == MarkShape::Circle)
                    .flat_map(|m| m.points.iter().map(|p| p.1)),
            )
            .chain(panel.references.iter().filter_map(|r| r.y));
        if !panel.boxes.is_empty() {
            draw_boxes(fig, panel, area).map_err(e)?;
            continue;
        }
        let (x0, x1) = fig.x_range.unwrap_or_else(|| range_of(xs));
        let (y0, y1) = fig.y_range.unwrap_or_else(|| range_of(ys));
        let mut chart = ChartBuilder::on(area)
            .caption(&panel.title, ("sans-serif", 15))
            .margin(8)
            .x_label_area_size(34)
            .y_label_area_size(44)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc(&fig.x_label)
            .y_desc(&fig.y_label)
            .x_label_formatter(&tick)
            .y_label_formatter(&tick)
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(e)?;
        for (i, s) in panel.series.iter().enumerate() {
            if s.points.is_empty() {
                // Holds its colour's place only: no line, no legend entry.
                continue;
            }
            let c = colour_of(&s.label, i);
            chart
                .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
                .map_err(e)?
                .label(s.label.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2))
                });
            if s.points.len() <= 12 {
                chart
                    .draw_series(s.points.iter().map(|p| Circle::new(*p, 3, c.filled())))
                    .map_err(e)?;
            }
        }
        for m in &panel.marks {
            let c = m
                .variant
                .as_deref()
                .map_or(RGBColor(90, 90, 90), |v| colour_of(v, 0));
            match m.shape {
                MarkShape::Circle => {
                    let drawn = chart
                        .draw_series(
                            m.points
                                .iter()
                                .map(|p| Circle::new(*p, 3, c.stroke_width(1))),
                        )
                        .map_err(e)?;
                    if !m.label.is_empty() {
                        drawn
                            .label(m.label.clone())
                            .legend(move |(x, y)| Circle::new((x + 8, y), 3, c.stroke_width(1)));
                    }
                }
                MarkShape::Bar => {
                    let drawn = chart
                        .draw_series((m.points.iter()).map(|p| {
                            PathElement::new(vec![(p.0, y0), (p.0, y1)], c.stroke_width(1))
                        }))
                        .map_err(e)?;
                    if !m.label.is_empty() {
                        drawn.label(m.label.clone()).legend(move |(x, y)| {
                            PathElement::new(
                                vec![(x + 8, y - 6), (x + 8, y + 6)],
                                c.stroke_width(2),
                            )
                        });
                    }
                }
            }
        }
        for r in &panel.references {
            let grey = RGBColor(110, 110, 110);
            let pts: Vec<(f64, f64)> = match r.y {
                Some(y) => dashes((x0, y), (x1, y)),
                None => dashes((r.x, y0), (r.x, y1)),
            };
            for pair in pts.chunks(2) {
                chart
                    .draw_series(std::iter::once(PathElement::new(pair.to_vec(), grey)))
                    .map_err(e)?;
            }
            let at = reference_label_at(r, (x0, x1, y0, y1));
            chart
                .draw_series(std::iter::once(Text::new(
                    r.label.clone(),
                    at,
                    ("sans-serif", 11).into_font().color(&grey),
                )))
                .map_err(e)?;
        }
        let labelled = panel.series.iter().any(|s| !s.points.is_empty())
            || panel.marks.iter().any(|m| !m.label.is_empty());
        if !labelled {
            continue;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(200, 200, 200))
            .label_font(("sans-serif", 11))
            .position(legend_position(
                panel,
                (x0, x1, y0, y1),
                area.dim_in_pixel(),
                fig.legend,
            ))
            .draw()
            .map_err(e)?;
    }
    root.present().map_err(e)?;
    Ok(())
}

/// Where a reference line's label starts (its text's top left), in data coordinates: just
/// above a horizontal line near the left edge, beside a vertical one near the bottom.
fn reference_label_at(r: &Reference, (x0, x1, y0, y1): (f64, f64, f64, f64)) -> (f64, f64) {
    match r.y {
        Some(y) => (x0 + (x1 - x0) * 0.02, y + (y1 - y0) * 0.045),
        None => (r.x + (x1 - x0) * 0.01, y0 + (y1 - y0) * 0.04),
    }
}

/// Where a panel's legend covers the least data: of the four corners, the top and bottom
/// middles and the middles of the sides, the one whose box (its size estimated from the
/// entries and the panel's pixels) holds the fewest samples of the curves, the marks and the
/// reference lines' labels; `preferred` wins ties.
fn legend_position(
    panel: &Panel,
    (x0, x1, y0, y1): (f64, f64, f64, f64),
    (w, h): (u32, u32),
    preferred: Corner,
) -> SeriesLabelPosition {
    // The plot area inside the panel: label areas, margins and caption taken off.
    let (pw, ph) = ((w as f64 - 64.0).max(50.0), (h as f64 - 76.0).max(50.0));
    let labels: Vec<&str> = (panel.series.iter())
        .filter(|s| !s.points.is_empty())
        .map(|s| s.label.as_str())
        .chain(
            (panel.marks.iter())
                .filter(|m| !m.label.is_empty())
                .map(|m| m.label.as_str()),
        )
        .collect();
    let chars = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0) as f64;
    let (bw, bh) = (
        ((chars * 6.2 + 40.0) / pw).min(1.0),
        ((labels.len() as f64 * 20.0 + 12.0) / ph).min(1.0),
    );
    let (mx, my) = (12.0 / pw, 12.0 / ph);
    // Samples of what the panel draws, as fractions of the plot area (y up).
    let (sx, sy) = ((x1 - x0).max(1e-12), (y1 - y0).max(1e-12));
    let frac = |(x, y): (f64, f64)| ((x - x0) / sx, (y - y0) / sy);
    let mut samples: Vec<(f64, f64)> = Vec::new();
    for s in &panel.series {
        let step = (s.points.len() / 2000).max(1);
        let pts: Vec<(f64, f64)> = s.points.iter().step_by(step).map(|&p| frac(p)).collect();
        samples.extend(&pts);
        for w2 in pts.windows(2) {
            for k in 1..16 {
                let t = k as f64 / 16.0;
                samples.push((
                    w2[0].0 + (w2[1].0 - w2[0].0) * t,
                    w2[0].1 + (w2[1].1 - w2[0].1) * t,
                ));
            }
        }
    }
    for m in &panel.marks {
        for &p in &m.points {
            match m.shape {
                MarkShape::Circle => samples.push(frac(p)),
                MarkShape::Bar => {
                    let x = frac(p).0;
                    samples.extend((0..=20).map(|k| (x, k as f64 / 20.0)));
                }
            }
        }
    }
    // A reference line's label: its text box (11-point text, from its top left down).
    for r in panel.references.iter().filter(|r| !r.label.is_empty()) {
        let (lx, ly) = frac(reference_label_at(r, (x0, x1, y0, y1)));
        let (tw, th) = (r.label.chars().count() as f64 * 6.2 / pw, 14.0 / ph);
        for i in 0..=10 {
            for j in 0..=2 {
                samples.push((lx + tw * i as f64 / 10.0, ly - th * j as f64 / 2.0));
            }
        }
    }
    use SeriesLabelPosition as P;
    let (left, right, middle) = (mx, 1.0 - mx - bw, 0.5 - bw / 2.0);
    let (top, bottom) = (1.0 - my - bh, my);
    let preferred = match preferred {
        Corner::LowerRight => P::LowerRight,
        Corner::UpperRight => P::UpperRight,
        Corner::UpperLeft => P::UpperLeft,
    };
    let candidates = [
        (P::UpperLeft, left, top),
        (P::UpperRight, right, top),
        (P::LowerRight, right, bottom),
        (P::LowerLeft, left, bottom),
        (P::UpperMiddle, middle, top),
        (P::LowerMiddle, middle, bottom),
        (P::MiddleLeft, left, 0.5 - bh / 2.0),
        (P::MiddleRight, right, 0.5 - bh / 2.0),
    ];
    // The box's place is an estimate (plotters puts it 5 px from the plot's edges, inside
    // label areas whose size varies): what lies within 12 px of it counts as covered.
    let (px, py) = (12.0 / pw, 12.0 / ph);
    let covered = |(fx, fy): (f64, f64)| {
        samples
            .iter()
            .filter(|(x, y)| {
                *x >= fx - px && *x <= fx + bw + px && *y >= fy - py && *y <= fy + bh + py
            })
            .count()
    };
    let same = |a: &P, b: &P| std::mem::discriminant(a) == std::mem::discriminant(b);
    let start = candidates
        .iter()
        .find(|c| same(&c.0, &preferred))
        .map_or(0, |c| covered((c.1, c.2)));
    let mut best = (preferred, start);
    for (pos, fx, fy) in candidates {
        let n = covered((fx, fy));
        if n < best.1 {
            best = (pos, n);
        }
    }
    best.0
}

/// A box plot: categories at x = 0, 1, ..., labelled with the boxes' names.
fn draw_boxes(
    fig: &Figure,
    panel: &Panel,
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
) -> Result<(), DrawingAreaErrorKind<std::io::Error>> {
    let n = panel.boxes.len();
    let (y0, y1) = fig
        .y_range
        .unwrap_or_else(|| range_of(panel.boxes.iter().flat_map(|b| [b.min, b.max])));
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 15))
        .margin(8)
        .x_label_area_size(34)
        .y_label_area_size(44)
        .build_cartesian_2d(-0.5..n as f64 - 0.5, y0..y1)?;
    let names: Vec<String> = panel.boxes.iter().map(|b| b.label.clone()).collect();
    chart
        .configure_mesh()
        .x_desc(&fig.x_label)
        .y_desc(&fig.y_label)
        .x_labels(n)
        .y_label_formatter(&tick)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .disable_x_mesh()
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    for (i, b) in panel.boxes.iter().enumerate() {
        let c = colour_of(&b.label, i);
        let x = i as f64;
        chart.draw_series(std::iter::once(Rectangle::new(
            [(x - 0.3, b.q1), (x + 0.3, b.q3)],
            c.mix(0.25).filled(),
        )))?;
        chart.draw_series(std::iter::once(Rectangle::new(
            [(x - 0.3, b.q1), (x + 0.3, b.q3)],
            c.stroke_width(2),
        )))?;
        let lines = [
            vec![(x - 0.3, b.median), (x + 0.3, b.median)],
            vec![(x, b.q3), (x, b.max)],
            vec![(x, b.q1), (x, b.min)],
            vec![(x - 0.12, b.max), (x + 0.12, b.max)],
            vec![(x - 0.12, b.min), (x + 0.12, b.min)],
        ];
        for l in lines {
            chart.draw_series(std::iter::once(PathElement::new(l, c.stroke_width(2))))?;
        }
    }
    Ok(())
}

/// A dashed segment from `a` to `b`, as point pairs.
fn dashes(a: (f64, f64), b: (f64, f64)) -> Vec<(f64, f64)> {
    const N: usize = 40;
    let mut out = Vec::with_capacity(N);
    for i in 0..N / 2 {
        let t0 = (2 * i) as f64 / N as f64;
        let t1 = (2 * i + 1) as f64 / N as f64;
        out.push((a.0 + (b.0 - a.0) * t0, a.1 + (b.1 - a.1) * t0));
        out.push((a.0 + (b.0 - a.0) * t1, a.1 + (b.1 - a.1) * t1));
    }
    out
}

/// A tick label without needless decimals: 1 not 1.0, 0.25, 2.5.
fn tick(v: &f64) -> String {
    let s = format!("{v:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" { "0".into() } else { s.into() }
}

#[cfg(test)]
mod tests {
    /// Regression: a figure's title with its context line (preset, workload, seeds,
    /// version) ran off both edges of a 640-pixel figure; it now wraps between words.
    #[test]
    fn a_long_title_wraps_between_words() {
        let title = "completion time (s) against loss (%), by variant (preset wlan, workload \
                     bulk-20MB, 4 seeds, qfec 0.1.0)";
        let lines = super::wrap_words(title, 58);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines.iter().all(|l| l.len() <= 58), "{lines:?}");
        assert_eq!(lines.join(" "), title);
        assert_eq!(super::wrap_words("short", 58), ["short"]);
        assert_eq!(super::wrap_words("", 58), [""]);
    }

    #[test]
    fn ticks_carry_no_needless_decimals() {
        let t: Vec<String> = [1.0, 0.25, 2.5, 1000.0, -0.0, 0.0001]
            .iter()
            .map(tick)
            .collect();
        assert_eq!(t, ["1", "0.25", "2.5", "1000", "0", "0.0001"]);
    }

    use super::*;

    /// Regression: ECDF legends sat in the lower right over curves that rise at the right
    /// edge (paper 003's Fig. 5, 1 kB panels); the legend goes where the curves leave room.
    #[test]
    fn the_legend_avoids_the_curves() {
        let series = |label: &str, points: Vec<(f64, f64)>| Series {
            label: label.into(),
            points,
        };
        // An ECDF that rises at 0.9 of the x range: the lower right, where ECDF legends
        // usually go, is covered, and so is the upper right.
        let panel = Panel {
            series: vec![series(
                "bbr+adaptive / quic",
                vec![(0.5, 0.0), (0.9, 0.0), (0.9, 1.0), (1.0, 1.0)],
            )],
            ..Panel::default()
        };
        let at = legend_position(&panel, (0.0, 1.0, 0.0, 1.0), (420, 330), Corner::LowerRight);
        assert!(
            !matches!(
                at,
                SeriesLabelPosition::LowerRight | SeriesLabelPosition::UpperRight
            ),
            "{at:?}"
        );
        // Nothing drawn where the caller prefers: its choice stands.
        let empty = Panel {
            series: vec![series("a", vec![(0.0, 0.0), (0.1, 0.1)])],
            ..Panel::default()
        };
        let at = legend_position(&empty, (0.0, 1.0, 0.0, 1.0), (640, 480), Corner::UpperRight);
        assert!(matches!(at, SeriesLabelPosition::UpperRight), "{at:?}");
    }

    /// Regression: paper 001's Fig. 2 drew its legend over the label of the paper's 25 % line
    /// (upper left, where the caller put the legend); the legend avoids reference labels.
    #[test]
    fn the_legend_avoids_reference_labels() {
        let panel = Panel {
            series: vec![Series {
                label: "bquic".into(),
                points: vec![(0.0, 0.0), (3700.0, -1.0)],
            }],
            references: vec![Reference {
                label: "paper: large pages 25 %".into(),
                y: Some(25.0),
                x: 0.0,
            }],
            ..Panel::default()
        };
        let range = (0.0, 3700.0, -7.0, 27.0);
        let at = legend_position(&panel, range, (900, 600), Corner::UpperLeft);
        assert!(!matches!(at, SeriesLabelPosition::UpperLeft), "{at:?}");
        // Without the label the caller's corner stands.
        let bare = Panel {
            references: Vec::new(),
            ..panel
        };
        let at = legend_position(&bare, range, (900, 600), Corner::UpperLeft);
        assert!(matches!(at, SeriesLabelPosition::UpperLeft), "{at:?}");
    }

    /// Regression: paper 002's Fig. 5 (640 x 480, seven entries) then put its legend in the
    /// lower left, over the first steps of an ECDF that run along the bottom edge (the box's
    /// estimated place missed them by a few pixels).
    #[test]
    fn the_legend_keeps_off_curves_along_the_edges() {
        let series = |label: &str, points: Vec<(f64, f64)>| Series {
            label: label.into(),
            points,
        };
        let at_100 = || vec![(100.0, 0.0), (100.0, 1.0)];
        let panel = Panel {
            series: vec![
                series("quic", at_100()),
                series(
                    "udp",
                    vec![(80.2, 0.005), (81.6, 0.015), (92.0, 0.06), (99.8, 1.0)],
                ),
                series("rs", vec![(84.6, 0.005), (96.0, 0.1), (100.0, 0.44)]),
                series("rs/message", vec![(83.5, 0.01), (94.0, 0.06), (99.9, 0.87)]),
                series("adaptive", at_100()),
                series("quic+adaptive", at_100()),
                series("quic+rlc", at_100()),
            ],
            references: vec![Reference {
                label: "paper: RS gets all data in > 35 % (its curve ends below)".into(),
                y: Some(0.65),
                x: 0.0,
            }],
            ..Panel::default()
        };
        let range = (79.0, 101.0, 0.0, 1.0);
        // Every place covers something here; not the curves, then (the label is covered
        // instead: the figure has no room for both).
        let at = legend_position(&panel, range, (640, 480), Corner::LowerRight);
        assert!(
            !matches!(
                at,
                SeriesLabelPosition::LowerLeft | SeriesLabelPosition::LowerRight
            ),
            "{at:?}"
        );
    }

    #[test]
    fn variants_keep_their_colour_in_every_figure() {
        assert_eq!(colour_of("rlc / quic", 0), colour_of("rlc", 5));
        assert_ne!(colour_of("rs / quic", 0), colour_of("rlc / quic", 0));
        assert_eq!(colour_of("something else", 2), COLORS[2]);
    }

    #[test]
    fn ecdf_steps_to_one() {
        let e = ecdf(&[3.0, 1.0, 2.0, f64::NAN]);
        assert_eq!(e.first(), Some(&(1.0, 0.0)));
        assert_eq!(e.last(), Some(&(3.0, 1.0)));
        assert_eq!(e.len(), 6);
    }
}
