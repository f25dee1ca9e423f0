//! Figures from run records (`qfec lab plot`): the distribution of a metric across runs
//! (ECDF), a metric against a swept parameter (median per value), or the time series a run
//! recorded (congestion window, smoothed RTT; with `lab run --trace` also bytes in flight,
//! goodput and FEC redundancy per 50 ms), with one curve per group of runs.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::metrics::{RunRecord, Stats};
use crate::plot::{BoxStat, Corner, Figure, Panel, Reference, Series, ecdf};

/// Runs a time-series figure draws at most (beyond, the lines cannot be told apart).
const MAX_SERIES_RUNS: usize = 8;

/// What a figure shows on its y axis (or its x axis, for an ECDF).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    CompletionTime,
    Goodput,
    Xi,
    Overhead,
    Retransmissions,
    /// Time series: congestion window.
    Cwnd,
    /// Time series: smoothed RTT.
    Rtt,
    /// Time series (`--trace`): the sender's bytes in flight.
    Inflight,
    /// Time series (`--trace`): goodput per bin.
    GoodputSeries,
    /// Time series (`--trace`): repair symbols over all symbols the sender sent, per bin.
    Redundancy,
}

impl Metric {
    const NAMES: &'static str = "completion_time_s (or dct), goodput_bps (or goodput), xi, \
         overhead, retransmissions (or retx), cwnd, rtt, inflight, goodput-ts, redundancy";

    /// Axis label with units.
    pub fn label(self) -> &'static str {
        match self {
            Metric::CompletionTime => "completion time (s)",
            Metric::Goodput => "goodput (Mb/s)",
            Metric::Xi => "completion time / plain QUIC's (xi)",
            Metric::Overhead => "FEC overhead (% of bytes)",
            Metric::Retransmissions => "retransmitted packets",
            Metric::Cwnd => "congestion window (kB)",
            Metric::Rtt => "smoothed RTT (ms)",
            Metric::Inflight => "bytes in flight (kB)",
            Metric::GoodputSeries => "goodput per 50 ms (Mb/s)",
            Metric::Redundancy => "repair symbols (% of symbols sent)",
        }
    }

    /// Whether the runs recorded it over time (the others are one value per run).
    pub fn is_series(self) -> bool {
        matches!(
            self,
            Metric::Cwnd
                | Metric::Rtt
                | Metric::Inflight
                | Metric::GoodputSeries
                | Metric::Redundancy
        )
    }

    fn of(self, r: &RunRecord) -> Option<f64> {
        match self {
            Metric::CompletionTime => r.finished_time(),
            Metric::Goodput => r
                .goodput_bps
                .filter(|_| r.finished_time().is_some())
                .map(|b| b / 1e6),
            Metric::Xi => r.xi,
            Metric::Overhead => Some(r.overhead() * 100.0),
            Metric::Retransmissions => Some(r.retransmissions as f64),
            Metric::Cwnd
            | Metric::Rtt
            | Metric::Inflight
            | Metric::GoodputSeries
            | Metric::Redundancy => None,
        }
    }

    fn series(self, r: &RunRecord) -> Vec<(f64, f64)> {
        match self {
            Metric::Cwnd => r
                .cwnd_trace
                .iter()
                .map(|&(t, w)| (t, w as f64 / 1e3))
                .collect(),
            Metric::Rtt => r.rtt_trace.iter().map(|&(t, s)| (t, s * 1e3)).collect(),
            Metric::Inflight => {
                trace_points(r, |t| t.inflight.iter().map(|&b| b as f64 / 1e3).collect())
            }
            Metric::GoodputSeries => {
                trace_points(r, |t| t.goodput_bps.iter().map(|&b| b / 1e6).collect())
            }
            Metric::Redundancy => trace_points(r, |t| {
                t.redundancy().into_iter().map(|x| x * 100.0).collect()
            }),
            _ => Vec::new(),
        }
    }
}

/// A `--trace` series of a run as (bin start s, value) points; none without a trace.
fn trace_points(
    r: &RunRecord,
    values: impl Fn(&crate::trace::RunTrace) -> Vec<f64>,
) -> Vec<(f64, f64)> {
    let Some(t) = &r.trace else {
        return Vec::new();
    };
    values(t)
        .into_iter()
        .enumerate()
        .map(|(i, v)| (t.time(i), v))
        .collect()
}

/// A name that is not a metric, parameter or grouping.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {got:?}: use one of {valid}")]
pub struct UnknownName {
    pub what: &'static str,
    pub got: String,
    pub valid: &'static str,
}

impl FromStr for Metric {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "completion_time_s" | "dct" | "completion_time" => Metric::CompletionTime,
            "goodput_bps" | "goodput" => Metric::Goodput,
            "xi" => Metric::Xi,
            "overhead" => Metric::Overhead,
            "retx" | "retransmissions" => Metric::Retransmissions,
            "cwnd" => Metric::Cwnd,
            "rtt" => Metric::Rtt,
            "inflight" | "bytes_in_flight" => Metric::Inflight,
            "goodput-ts" | "goodput_ts" => Metric::GoodputSeries,
            "redundancy" => Metric::Redundancy,
            _ => {
                return Err(UnknownName {
                    what: "metric",
                    got: s.into(),
                    valid: Metric::NAMES,
                });
            }
        })
    }
}

/// A record field runs are grouped by, or swept over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Variant,
    Preset,
    Workload,
    Loss,
    Seed,
}

impl Field {
    const NAMES: &'static str = "variant, preset, workload, loss, seed";

    fn key(self, r: &RunRecord) -> String {
        match self {
            Field::Variant => r.variant.clone(),
            Field::Preset => r.preset.clone(),
            Field::Workload => r.workload.clone(),
            Field::Loss => format!("{}%", r.loss * 100.0),
            Field::Seed => format!("seed {}", r.seed),
        }
    }

    /// The field as a number, for an x axis.
    fn value(self, r: &RunRecord) -> Option<f64> {
        match self {
            Field::Loss => Some(r.loss * 100.0),
            Field::Seed => Some(r.seed as f64),
            _ => None,
        }
    }

    /// The field's name in prose and in errors ("preset", "loss").
    fn label_word(self) -> &'static str {
        match self {
            Field::Loss => "loss",
            Field::Seed => "seed",
            Field::Variant => "variant",
            Field::Preset => "preset",
            Field::Workload => "workload",
        }
    }

    /// `qfec lab plot`'s option that selects one value of the field.
    fn flag(self) -> &'static str {
        self.label_word()
    }

    fn label(self) -> &'static str {
        match self {
            Field::Loss => "loss (%)",
            Field::Seed => "seed",
            Field::Variant => "variant",
            Field::Preset => "preset",
            Field::Workload => "workload",
        }
    }
}

impl FromStr for Field {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "variant" => Field::Variant,
            "preset" => Field::Preset,
            "workload" => Field::Workload,
            "loss" => Field::Loss,
            "seed" => Field::Seed,
            _ => {
                return Err(UnknownName {
                    what: "field",
                    got: s.into(),
                    valid: Field::NAMES,
                });
            }
        })
    }
}

/// What to draw.
#[derive(Debug, Clone, PartialEq)]
pub struct ChartSpec {
    pub y: Metric,
    /// Sweep: the median of `y` against this numeric field, one line per group.
    pub x: Option<Field>,
    pub by: Field,
    /// A box plot of `y` per group instead of ECDFs.
    pub boxes: bool,
    pub title: Option<String>,
    /// One panel per value of this field.
    pub facet: Option<Field>,
    /// Pool runs that differ in a field the figure does not show (preset, workload, loss,
    /// variant) into one curve; refused otherwise.
    pub pool: bool,
}

/// Why a chart cannot be drawn from these runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChartError {
    #[error("--x {0} is not numeric: use --x loss or --x seed")]
    NotNumeric(&'static str),
    #[error(
        "no run has {0}: time series need runs written as JSON lines by `qfec lab run --out FILE.jsonl` (bytes in flight, goodput-ts and redundancy also --trace)"
    )]
    NoSeries(&'static str),
    #[error("no run has a value for {0} (xi needs a FEC variant beside `none` in the campaign)")]
    NoValues(&'static str),
    #[error("--box and --x do not go together: a box plot's x axis is the groups")]
    BoxWithX,
    #[error("time series ({0}) take no --x or --box: the x axis is time")]
    SeriesWithX(&'static str),
    #[error("{0} runs selected: a time-series figure draws at most 8; select fewer with --seed")]
    TooMany(usize),
    #[error(
        "the runs differ in {field} ({values}), which one curve would pool: choose one \
         with --{flag} VALUE, or give --facet {flag} or --by {flag} (--pool to pool them anyway)"
    )]
    Pooled {
        field: &'static str,
        flag: &'static str,
        values: String,
    },
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// The figure `spec` asks for, from `records`: one panel, or one per value of `spec.facet`;
/// its title ends with what the runs have in common (preset, workload, loss, seeds, qfec
/// version), so that a figure says what it shows.
pub fn chart(records: &[RunRecord], spec: &ChartSpec) -> Result<Figure, ChartError> {
    if let Some(x) = spec.x
        && x.value(&RunRecord::default()).is_none()
    {
        return Err(ChartError::NotNumeric(x.label()));
    }
    if !spec.pool {
        for f in [Field::Preset, Field::Workload, Field::Loss, Field::Variant] {
            let shown = f == spec.by || Some(f) == spec.x || Some(f) == spec.facet;
            // A time series labels each run's curve with its loss and seed.
            let labelled = spec.y.is_series() && f == Field::Loss;
            let values: std::collections::BTreeSet<String> =
                records.iter().map(|r| f.key(r)).collect();
            if !shown && !labelled && values.len() > 1 {
                let mut list: Vec<String> = values.into_iter().take(4).collect();
                if list.len() == 4 {
                    list[3] = "...".into();
                }
                return Err(ChartError::Pooled {
                    field: f.label_word(),
                    flag: f.flag(),
                    values: list.join(", "),
                });
            }
        }
    }
    let mut fig = match spec.facet {
        None => panel_chart(records, spec)?,
        Some(f) => {
            let mut parts: BTreeMap<String, Vec<RunRecord>> = BTreeMap::new();
            for r in records {
                parts.entry(f.key(r)).or_default().push(r.clone());
            }
            let one = ChartSpec {
                facet: None,
                ..spec.clone()
            };
            let mut fig: Option<Figure> = None;
            for (value, runs) in &parts {
                let mut part = panel_chart(runs, &one)?;
                let mut panel = part.panels.remove(0);
                panel.title = format!("{} {value}", f.label_word());
                match &mut fig {
                    None => {
                        part.panels = vec![panel];
                        fig = Some(part);
                    }
                    Some(fig) => fig.panels.push(panel),
                }
            }
            let mut fig = fig.expect("at least one run");
            fig.columns = fig.panels.len().min(3);
            fig
        }
    };
    let context = context(records, spec);
    if !context.is_empty() {
        fig.title = format!("{} ({context})", fig.title);
    }
    Ok(fig)
}

/// What every run of the figure shares, and how many seeds: "preset wlan, loss 2%, 10 seeds,
/// qfec 0.1.0".
fn context(records: &[RunRecord], spec: &ChartSpec) -> String {
    let mut parts = Vec::new();
    for f in [Field::Preset, Field::Workload, Field::Loss] {
        let values: std::collections::BTreeSet<String> = records.iter().map(|r| f.key(r)).collect();
        let shown = f == spec.by || Some(f) == spec.x || Some(f) == spec.facet;
        if let (false, [v]) = (shown, values.iter().collect::<Vec<_>>().as_slice())
            && !v.is_empty()
        {
            parts.push(format!("{} {v}", f.label_word()));
        }
    }
    let seeds: std::collections::BTreeSet<u64> = records.iter().map(|r| r.seed).collect();
    parts.push(match seeds.len() {
        1 => format!("seed {}", seeds.first().unwrap()),
        n => format!("{n} seeds"),
    });
    let versions: std::collections::BTreeSet<&str> = records
        .iter()
        .map(|r| r.version.as_str())
        .filter(|v| !v.is_empty())
        .collect();
    if !versions.is_empty() {
        parts.push(format!(
            "qfec {}",
            versions.into_iter().collect::<Vec<_>>().join("/")
        ));
    }
    parts.join(", ")
}

/// One panel of `spec.y` over `records`.
fn panel_chart<R: std::borrow::Borrow<RunRecord>>(
    records: &[R],
    spec: &ChartSpec,
) -> Result<Figure, ChartError> {
    let records: Vec<&RunRecord> = records.iter().map(|r| r.borrow()).collect();
    let mut groups: BTreeMap<String, Vec<&RunRecord>> = BTreeMap::new();
    for r in records.iter().copied() {
        groups.entry(spec.by.key(r)).or_default().push(r);
    }
    if spec.boxes && !spec.y.is_series() {
        return box_chart(&groups, spec);
    }
    let (series, x_label, legend) = if spec.y.is_series() {
        if spec.x.is_some() || spec.boxes {
            return Err(ChartError::SeriesWithX(spec.y.label()));
        }
        let n = records
            .iter()
            .filter(|r| !spec.y.series(r).is_empty())
            .count();
        if n == 0 {
            return Err(ChartError::NoSeries(spec.y.label()));
        }
        if n > MAX_SERIES_RUNS {
            return Err(ChartError::TooMany(n));
        }
        let mut out = Vec::new();
        for (key, runs) in &groups {
            for r in runs {
                let points = spec.y.series(r);
                if !points.is_empty() {
                    let loss = if spec.by == Field::Loss {
                        String::new()
                    } else {
                        format!(", loss {}%", r.loss * 100.0)
                    };
                    out.push(Series {
                        label: format!("{key}{loss}, seed {}", r.seed),
                        points,
                    });
                }
            }
        }
        (out, "time (s)".to_string(), Corner::UpperRight)
    } else if let Some(x) = spec.x {
        if x.value(&RunRecord::default()).is_none() {
            return Err(ChartError::NotNumeric(x.label()));
        }
        let mut out = Vec::new();
        for (key, runs) in &groups {
            let mut at: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
            for r in runs {
                if let (Some(xv), Some(yv)) = (x.value(r), spec.y.of(r)) {
                    at.entry(xv.to_bits()).or_default().push(yv);
                }
            }
            let mut points: Vec<(f64, f64)> = at
                .iter()
                .filter_map(|(xb, ys)| Some((f64::from_bits(*xb), Stats::of(ys)?.median)))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            if !points.is_empty() {
                out.push(Series {
                    label: key.clone(),
                    points,
                });
            }
        }
        (out, x.label().to_string(), Corner::UpperLeft)
    } else {
        let mut out = Vec::new();
        for (key, runs) in &groups {
            let ys: Vec<f64> = runs.iter().filter_map(|r| spec.y.of(r)).collect();
            if !ys.is_empty() {
                out.push(Series {
                    label: key.clone(),
                    points: ecdf(&ys),
                });
            }
        }
        (out, spec.y.label().to_string(), Corner::LowerRight)
    };
    if series.is_empty() {
        return Err(ChartError::NoValues(spec.y.label()));
    }
    let ecdf_chart = !spec.y.is_series() && spec.x.is_none();
    let references = if ecdf_chart && spec.y == Metric::Xi {
        vec![Reference {
            label: "xi = 1".into(),
            y: None,
            x: 1.0,
        }]
    } else {
        Vec::new()
    };
    let y_label = if ecdf_chart {
        "fraction of runs (ECDF)".to_string()
    } else if spec.x.is_some() {
        format!("median {}", spec.y.label())
    } else {
        spec.y.label().to_string()
    };
    let title = spec.title.clone().unwrap_or_else(|| match spec.x {
        _ if spec.y.is_series() => format!("{} over time, by {}", spec.y.label(), spec.by),
        Some(x) => format!("{} against {}, by {}", spec.y.label(), x.label(), spec.by),
        None => format!("{} across runs, by {}", spec.y.label(), spec.by),
    });
    Ok(Figure {
        title,
        x_label,
        y_label,
        panels: vec![Panel {
            title: String::new(),
            series,
            references,
            ..Panel::default()
        }],
        columns: 1,
        x_range: None,
        y_range: ecdf_chart.then_some((0.0, 1.0)),
        legend,
    })
}

/// One box per group: the spread of `spec.y` across its runs.
fn box_chart(
    groups: &BTreeMap<String, Vec<&RunRecord>>,
    spec: &ChartSpec,
) -> Result<Figure, ChartError> {
    if spec.x.is_some() {
        return Err(ChartError::BoxWithX);
    }
    let boxes: Vec<BoxStat> = groups
        .iter()
        .filter_map(|(key, runs)| {
            let ys: Vec<f64> = runs.iter().filter_map(|r| spec.y.of(r)).collect();
            BoxStat::of(key, &ys)
        })
        .collect();
    if boxes.is_empty() {
        return Err(ChartError::NoValues(spec.y.label()));
    }
    Ok(Figure {
        title: spec
            .title
            .clone()
            .unwrap_or_else(|| format!("{} across runs, by {}", spec.y.label(), spec.by)),
        x_label: spec.by.label().into(),
        y_label: spec.y.label().into(),
        panels: vec![Panel {
            boxes,
            ..Panel::default()
        }],
        columns: 1,
        x_range: None,
        y_range: None,
        legend: Corner::UpperRight,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(variant: &str, loss: f64, seed: u64, t: f64) -> RunRecord {
        RunRecord {
            variant: variant.into(),
            loss,
            seed,
            completed: true,
            completion_time_s: Some(t),
            cwnd_trace: vec![(0.0, 12_000), (0.1, 24_000)],
            ..RunRecord::default()
        }
    }

    /// A chart of `y` (against `x`) by `by`: ECDFs or lines, one panel, runs never pooled.
    fn spec(y: Metric, x: Option<Field>, by: Field) -> ChartSpec {
        ChartSpec {
            y,
            x,
            by,
            boxes: false,
            title: None,
            facet: None,
            pool: false,
        }
    }

    fn runs() -> Vec<RunRecord> {
        let mut v = Vec::new();
        for (variant, base) in [("none", 1.0), ("rlc", 2.0)] {
            for loss in [0.0, 0.02] {
                for seed in 1..=3 {
                    v.push(rec(variant, loss, seed, base + loss * 100.0 + seed as f64));
                }
            }
        }
        v
    }

    #[test]
    fn one_ecdf_per_group() {
        let spec = spec(Metric::CompletionTime, None, Field::Variant);
        // Two losses in one curve per variant: refused, unless asked for.
        assert_eq!(
            chart(&runs(), &spec),
            Err(ChartError::Pooled {
                field: "loss",
                flag: "loss",
                values: "0%, 2%".into()
            })
        );
        let spec = ChartSpec { pool: true, ..spec };
        let fig = chart(&runs(), &spec).unwrap();
        let s = &fig.panels[0].series;
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].label.as_str(), s[0].points.len()), ("none", 12));
        assert_eq!(s[1].points.last(), Some(&(7.0, 1.0)));
        assert_eq!(fig.y_range, Some((0.0, 1.0)));
    }

    #[test]
    fn medians_against_a_swept_parameter() {
        let spec = spec(Metric::CompletionTime, Some(Field::Loss), Field::Variant);
        let fig = chart(&runs(), &spec).unwrap();
        let s = &fig.panels[0].series;
        assert_eq!(s[0].points, vec![(0.0, 3.0), (2.0, 5.0)]);
        assert_eq!(s[1].points, vec![(0.0, 4.0), (2.0, 6.0)]);
        let bad = ChartSpec {
            x: Some(Field::Variant),
            ..spec
        };
        assert_eq!(chart(&runs(), &bad), Err(ChartError::NotNumeric("variant")));
    }

    #[test]
    fn one_box_per_group() {
        let spec = ChartSpec {
            boxes: true,
            pool: true,
            ..spec(Metric::CompletionTime, None, Field::Loss)
        };
        let fig = chart(&runs(), &spec).unwrap();
        let b = &fig.panels[0].boxes;
        assert_eq!(b.len(), 2);
        // Loss 0 %: none 2, 3, 4 and rlc 3, 4, 5.
        assert_eq!(
            (b[0].label.as_str(), b[0].min, b[0].median, b[0].max),
            ("0%", 2.0, 3.5, 5.0)
        );
        assert_eq!((b[0].q1, b[0].q3), (3.0, 4.0));
        let with_x = ChartSpec {
            x: Some(Field::Seed),
            ..spec
        };
        assert_eq!(chart(&runs(), &with_x), Err(ChartError::BoxWithX));
    }

    #[test]
    fn a_panel_per_facet_and_a_title_that_says_what_is_drawn() {
        let spec = ChartSpec {
            facet: Some(Field::Loss),
            ..spec(Metric::CompletionTime, None, Field::Variant)
        };
        let fig = chart(&runs(), &spec).unwrap();
        assert_eq!(fig.panels.len(), 2);
        assert_eq!(
            (fig.panels[0].title.as_str(), fig.panels[1].title.as_str()),
            ("loss 0%", "loss 2%")
        );
        // Loss 2 %: none at 4, 5, 6 s.
        assert_eq!(fig.panels[1].series[0].points.last(), Some(&(6.0, 1.0)));
        assert!(fig.title.ends_with("(3 seeds)"), "{}", fig.title);
        let one: Vec<RunRecord> = runs()
            .into_iter()
            .filter(|r| r.loss > 0.0)
            .map(|r| RunRecord {
                preset: "wlan".into(),
                version: "0.1.0".into(),
                ..r
            })
            .collect();
        let fig = chart(
            &one,
            &ChartSpec {
                facet: None,
                ..spec
            },
        )
        .unwrap();
        assert!(
            fig.title
                .ends_with("(preset wlan, loss 2%, 3 seeds, qfec 0.1.0)"),
            "{}",
            fig.title
        );
    }

    #[test]
    fn time_series_of_few_runs() {
        let spec = spec(Metric::Cwnd, None, Field::Variant);
        assert_eq!(chart(&runs(), &spec), Err(ChartError::TooMany(12)));
        let few: Vec<RunRecord> = runs().into_iter().filter(|r| r.seed == 1).collect();
        let fig = chart(&few, &spec).unwrap();
        assert_eq!(fig.panels[0].series.len(), 4);
        assert_eq!(fig.panels[0].series[1].label, "none, loss 2%, seed 1");
        assert_eq!(
            fig.panels[0].series[0].points,
            vec![(0.0, 12.0), (0.1, 24.0)]
        );
        assert!(
            "latency"
                .parse::<Metric>()
                .unwrap_err()
                .to_string()
                .contains("cwnd")
        );
    }
}
