//! Result writers: CSV, JSON lines, and a fixed-width summary table.

use std::collections::BTreeMap;
use std::io::{self, Write};

use crate::metrics::{RunRecord, Stats, Summary};

/// The columns of a runs file in CSV (and of the Python package's DataFrame), each with what
/// it measures and its unit. JSON lines carry these fields and more (links, settings,
/// version, per-flow and per-path records, time series).
pub const RECORD_COLUMNS: &[(&str, &str)] = &[
    (
        "scenario",
        "scenario name (\"cli\" for a run from presets and options)",
    ),
    (
        "preset",
        "link preset, or empty for links the scenario describes",
    ),
    (
        "variant",
        "protocol variant: the values of the options given as lists, joined by /; \"default\" when none; a run of several flows joins each flow's with +",
    ),
    (
        "loss",
        "random loss rate of the point, fraction (0.02 = 2 %)",
    ),
    (
        "seed",
        "the run's seed: the same seed and options give the same run",
    ),
    (
        "workload",
        "what the client fetched or received, e.g. bulk-20MB (the command line's bulk:20MB), files-10kB+1MB, page-flickr, realtime-30x8x1000B",
    ),
    (
        "completed",
        "the transfer finished within the time limit (true/false)",
    ),
    (
        "completion_time_s",
        "download completion time (page-load time for pages), s",
    ),
    (
        "goodput_bps",
        "application bytes delivered over completion time, bit/s",
    ),
    (
        "handshake_s",
        "from the client's connect to its handshake's completion, s",
    ),
    ("app_bytes", "application bytes delivered to the client"),
    ("bytes_on_wire", "UDP payload bytes both endpoints sent"),
    ("packets_sent", "packets both endpoints sent"),
    ("ack_frames_sent", "ACK frames both endpoints sent"),
    (
        "retransmissions",
        "packets that carried retransmitted data, both endpoints",
    ),
    (
        "spurious_retransmissions",
        "packets declared lost that arrived after all",
    ),
    (
        "congestion_undos",
        "window reductions undone: every loss behind them arrived after all (--reordering adaptive) or was recovered by the peer (mask)",
    ),
    (
        "reordering_max_pkts",
        "largest reordering the spurious losses showed, packets",
    ),
    (
        "packet_threshold_max",
        "largest packet threshold loss detection reached (0: no spurious loss)",
    ),
    (
        "late_recovered_symbols",
        "FEC symbols recovered whose original arrived later (only late, not lost)",
    ),
    (
        "fec_bytes",
        "bytes FEC added on the wire: repair packets and FEC frames (overhead = fec_bytes / bytes_on_wire)",
    ),
    ("repair_symbols", "FEC repair symbols sent, both endpoints"),
    (
        "recovered_symbols",
        "source symbols FEC recovered, both endpoints",
    ),
    (
        "xi",
        "completion time over that of the variant without FEC at the same point and seed (paper 000's xi); empty without such a baseline",
    ),
    (
        "app_data_fraction",
        "real-time: fraction of the application data sent that arrived",
    ),
    (
        "rebuffering_s",
        "real-time: total re-buffering (a message period per message not complete when due), s",
    ),
    (
        "msg_delay_p50_s",
        "real-time: median send-to-complete delay of the messages that completed, s",
    ),
    (
        "msg_delay_p95_s",
        "real-time: 95th percentile of that delay, s",
    ),
    (
        "msg_delay_p99_s",
        "real-time: 99th percentile of that delay, s",
    ),
    (
        "fairness",
        "several flows: Jain's index over their goodputs while all were active (1 = equal shares)",
    ),
    ("sim_events", "simulator events the run processed"),
    (
        "wall_time_s",
        "host time the run took, s (the one column that differs between equal runs)",
    ),
    (
        "error",
        "why the run failed, in one line, empty when it did not (JSON lines add error_detail: where each connection stood)",
    ),
];

/// The quantities of the per-point summary (the table `qfec lab run` prints and
/// `--summary-out`'s CSV) that are not runs-file columns, with their units. The others carry
/// their runs-file names; the summary CSV names each statistic `QUANTITY_STATISTIC`
/// (median, mean, p10, p90, p95, min, max), and the table puts the statistic under the quantity.
pub const SUMMARY_QUANTITIES: &[(&str, &str)] = &[
    (
        "runs",
        "runs of the point (scenario, preset, variant, workload, loss) over its seeds",
    ),
    (
        "completed",
        "of those, the runs that finished their transfer",
    ),
    (
        "overhead",
        "fec_bytes / bytes_on_wire of a run, fraction (0.05 = 5 %)",
    ),
    (
        "start_s",
        "per-flow table: when the flow connected, s after the run's start",
    ),
    (
        "shared_goodput_bps",
        "per-flow table: the flow's goodput while every flow was active, bit/s",
    ),
    (
        "share",
        "per-flow table: that goodput over the sum of all flows', fraction",
    ),
];

/// Quote a CSV field when needed (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn opt(v: Option<f64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

/// Writes `path` whole through a temporary file beside it (`PATH.tmp`), synced and then
/// renamed over it: a crash leaves the old file or the new one, never a part.
pub fn replace_file(
    path: &std::path::Path,
    write: impl FnOnce(&mut io::BufWriter<std::fs::File>) -> io::Result<()>,
) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let mut w = io::BufWriter::new(std::fs::File::create(&tmp)?);
    write(&mut w)?;
    w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Write records as CSV with a header line (traces are left out; use JSON lines for them).
pub fn write_csv<W: Write>(mut w: W, records: &[RunRecord]) -> io::Result<()> {
    let names: Vec<&str> = RECORD_COLUMNS.iter().map(|(n, _)| *n).collect();
    writeln!(w, "{}", names.join(","))?;
    for r in records {
        let row = [
            csv_field(&r.scenario),
            csv_field(&r.preset),
            csv_field(&r.variant),
            r.loss.to_string(),
            r.seed.to_string(),
            csv_field(&r.workload),
            r.completed.to_string(),
            opt(r.completion_time_s),
            opt(r.goodput_bps),
            opt(r.handshake_s),
            r.app_bytes.to_string(),
            r.bytes_on_wire.to_string(),
            r.packets_sent.to_string(),
            r.ack_frames_sent.to_string(),
            r.retransmissions.to_string(),
            r.spurious_retransmissions.to_string(),
            r.congestion_undos.to_string(),
            r.reordering_max_pkts.to_string(),
            r.packet_threshold_max.to_string(),
            r.late_recovered_symbols.to_string(),
            r.fec_bytes.to_string(),
            r.repair_symbols.to_string(),
            r.recovered_symbols.to_string(),
            opt(r.xi),
            opt(r.app_data_fraction),
            opt(r.rebuffering_s),
            opt(r.msg_delay_p50_s),
            opt(r.msg_delay_p95_s),
            opt(r.msg_delay_p99_s),
            opt(r.fairness),
            r.sim_events.to_string(),
            r.wall_time_s.to_string(),
            csv_field(r.error.as_deref().unwrap_or("")),
        ];
        writeln!(w, "{}", row.join(","))?;
    }
    Ok(())
}

/// Write one JSON object per line (records keep their traces).
pub fn write_jsonl<W: Write, T: serde::Serialize>(mut w: W, items: &[T]) -> io::Result<()> {
    for it in items {
        serde_json::to_writer(&mut w, it)?;
        w.write_all(b"\n")?;
    }
    Ok(())
}

/// Read JSON lines back (e.g. to re-aggregate a finished campaign).
pub fn read_jsonl<T: serde::de::DeserializeOwned>(text: &str) -> Result<Vec<T>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str(l).map_err(|e| format!("line {}: {e}", i + 1)))
        .collect()
}

/// Write summaries as CSV (median, mean, p10, p90, p95, min, max per quantity).
pub fn write_summary_csv<W: Write>(mut w: W, sums: &[Summary]) -> io::Result<()> {
    let metrics = [
        "completion_time_s",
        "goodput_bps",
        "retransmissions",
        "overhead",
        "xi",
        "repair_symbols",
        "recovered_symbols",
        "app_data_fraction",
        "rebuffering_s",
        "msg_delay_p95_s",
        "fairness",
    ];
    let mut head = vec![
        "scenario",
        "preset",
        "variant",
        "workload",
        "loss",
        "runs",
        "completed",
    ]
    .into_iter()
    .map(String::from)
    .collect::<Vec<_>>();
    for m in metrics {
        for s in ["median", "mean", "p10", "p90", "p95", "min", "max"] {
            head.push(format!("{m}_{s}"));
        }
    }
    writeln!(w, "{}", head.join(","))?;
    for s in sums {
        let mut row = vec![
            csv_field(&s.scenario),
            csv_field(&s.preset),
            csv_field(&s.variant),
            csv_field(&s.workload),
            s.loss.to_string(),
            s.runs.to_string(),
            s.completed.to_string(),
        ];
        for st in [
            &s.completion_time_s,
            &s.goodput_bps,
            &s.retransmissions,
            &s.overhead,
            &s.xi,
            &s.repair_symbols,
            &s.recovered_symbols,
            &s.app_data_fraction,
            &s.rebuffering_s,
            &s.msg_delay_p95_s,
            &s.fairness,
        ] {
            match st {
                Some(x) => row.extend(
                    [x.median, x.mean, x.p10, x.p90, x.p95, x.min, x.max].map(|v| v.to_string()),
                ),
                None => row.extend(std::iter::repeat_n(String::new(), 7)),
            }
        }
        writeln!(w, "{}", row.join(","))?;
    }
    Ok(())
}

fn cell(st: &Option<Stats>, f: impl Fn(&Stats) -> f64, prec: usize) -> String {
    st.as_ref()
        .map(|s| format!("{:.*}", prec, f(s)))
        .unwrap_or_else(|| "-".into())
}

/// A table column: the quantity (a runs-file column, or none for the key columns) and
/// the statistic of it, or the key's name. The summary CSV names the same value
/// `QUANTITY_STATISTIC`.
type Col = (Option<&'static str>, &'static str);

/// A readable fixed-width table, one row per parameter point. Its quantities carry the
/// runs file's names and units (`qfec lab run --columns`), each with the statistics over
/// the point's runs under it (the summary CSV's `QUANTITY_STATISTIC`).
pub fn summary_table(sums: &[Summary]) -> String {
    summary_table_fit(sums, None)
}

/// Columns [`summary_table_fit`] leaves out first, in order, to fit a width; the others
/// (which point, the completions, the median completion time and xi, the real-time and
/// fairness measures) stay.
const DROP_FIRST: &[Col] = &[
    (None, "scenario"),
    (Some("completion_time_s"), "p10"),
    (Some("completion_time_s"), "p90"),
    (Some("completion_time_s"), "mean"),
    (Some("recovered_symbols"), "mean"),
    (Some("repair_symbols"), "mean"),
    (Some("xi"), "p95"),
    (None, "runs"),
    (Some("retransmissions"), "mean"),
    (Some("msg_delay_p95_s"), "median"),
    (Some("rebuffering_s"), "median"),
    (Some("overhead"), "mean"),
    (Some("goodput_bps"), "median"),
];

/// [`summary_table`] at most `width` characters wide when it can be: columns of less
/// interest ([`DROP_FIRST`]) left out until it fits, and a last line saying how many.
/// `None`: the whole table.
pub fn summary_table_fit(sums: &[Summary], width: Option<usize>) -> String {
    let mut header: Vec<Col> = vec![
        (None, "scenario"),
        (None, "preset"),
        (None, "variant"),
        (None, "workload"),
        (None, "loss"),
        (None, "runs"),
        (None, "completed"),
        (Some("completion_time_s"), "median"),
        (Some("completion_time_s"), "p10"),
        (Some("completion_time_s"), "p90"),
        (Some("completion_time_s"), "mean"),
        (Some("goodput_bps"), "median"),
        (Some("retransmissions"), "mean"),
    ];
    // FEC campaigns add paper 000's xi (completion time over the no-FEC variant's, same
    // point and seed), the overhead and the symbols repaired.
    let fec = sums
        .iter()
        .any(|s| s.xi.is_some() || s.repair_symbols.is_some_and(|x| x.max > 0.0));
    if fec {
        header.extend([
            (Some("xi"), "median"),
            (Some("xi"), "p95"),
            (Some("overhead"), "mean"),
            (Some("repair_symbols"), "mean"),
            (Some("recovered_symbols"), "mean"),
        ]);
    }
    // Real-time workloads add their playout metrics (paper 002).
    let realtime = sums.iter().any(|s| s.app_data_fraction.is_some());
    if realtime {
        header.extend([
            (Some("app_data_fraction"), "median"),
            (Some("rebuffering_s"), "median"),
            (Some("msg_delay_p95_s"), "median"),
        ]);
    }
    // Several flows on one link add Jain's fairness index over their goodputs.
    let flows = sums.iter().any(|s| s.fairness.is_some());
    if flows {
        header.push((Some("fairness"), "median"));
    }
    let rows: Vec<Vec<String>> = sums
        .iter()
        .map(|s| {
            vec![
                s.scenario.clone(),
                s.preset.clone(),
                s.variant.clone(),
                s.workload.clone(),
                s.loss.to_string(),
                s.runs.to_string(),
                s.completed.to_string(),
                cell(&s.completion_time_s, |x| x.median, 3),
                cell(&s.completion_time_s, |x| x.p10, 3),
                cell(&s.completion_time_s, |x| x.p90, 3),
                cell(&s.completion_time_s, |x| x.mean, 3),
                cell(&s.goodput_bps, |x| x.median, 0),
                cell(&s.retransmissions, |x| x.mean, 1),
            ]
            .into_iter()
            .chain(fec.then(|| cell(&s.xi, |x| x.median, 3)))
            .chain(fec.then(|| cell(&s.xi, |x| x.p95, 3)))
            .chain(fec.then(|| cell(&s.overhead, |x| x.mean, 4)))
            .chain(fec.then(|| cell(&s.repair_symbols, |x| x.mean, 1)))
            .chain(fec.then(|| cell(&s.recovered_symbols, |x| x.mean, 1)))
            .chain(realtime.then(|| cell(&s.app_data_fraction, |x| x.median, 4)))
            .chain(realtime.then(|| cell(&s.rebuffering_s, |x| x.median, 3)))
            .chain(realtime.then(|| cell(&s.msg_delay_p95_s, |x| x.median, 4)))
            .chain(flows.then(|| cell(&s.fairness, |x| x.median, 3)))
            .collect()
        })
        .collect();
    let mut rows = rows;
    let wide = |t: &str| t.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    let mut table = render(&header, &rows, 4);
    let Some(width) = width else {
        return table;
    };
    let (mut text, mut dropped) = (4, 0);
    for col in DROP_FIRST {
        if wide(&table) <= width {
            break;
        }
        let Some(i) = header.iter().position(|c| c == col) else {
            continue;
        };
        header.remove(i);
        for r in &mut rows {
            r.remove(i);
        }
        if i < text {
            text -= 1;
        }
        dropped += 1;
        table = render(&header, &rows, text);
    }
    if dropped > 0 {
        table.push_str(&format!(
            "({dropped} columns left out to fit {width} columns; --wide shows them all)\n"
        ));
    }
    table
}

/// A text table: the first `text` columns left-aligned, the others (numbers) right-aligned.
/// Columns of one quantity share a first header line that names it; the second names the
/// key or the statistic.
fn render(header: &[Col], rows: &[Vec<String>], text: usize) -> String {
    let mut widths: Vec<usize> = header.iter().map(|(_, h)| h.len()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    // Runs of columns under one quantity: widen the first until the name fits.
    let mut groups: Vec<(Option<&str>, std::ops::Range<usize>)> = Vec::new();
    for (i, (q, _)) in header.iter().enumerate() {
        match groups.last_mut() {
            Some((g, r)) if q.is_some() && g == q => r.end = i + 1,
            _ => groups.push((*q, i..i + 1)),
        }
    }
    for (q, r) in &groups {
        let span = |w: &[usize]| w[r.clone()].iter().sum::<usize>() + 2 * (r.len() - 1);
        if let Some(q) = q
            && span(&widths) < q.len()
        {
            widths[r.start] += q.len() - span(&widths);
        }
    }
    let mut out = String::new();
    let line = |cells: &[String], out: &mut String| {
        let parts: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if i < text {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        out.push_str(parts.join("  ").trim_end());
        out.push('\n');
    };
    let top: Vec<String> = groups
        .iter()
        .map(|(q, r)| {
            let w = widths[r.clone()].iter().sum::<usize>() + 2 * (r.len() - 1);
            format!("{:>w$}", q.unwrap_or(""))
        })
        .collect();
    out.push_str(top.join("  ").trim_end());
    out.push('\n');
    line(
        &header
            .iter()
            .map(|(_, h)| h.to_string())
            .collect::<Vec<_>>(),
        &mut out,
    );
    line(
        &widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>(),
        &mut out,
    );
    for r in rows {
        line(r, &mut out);
    }
    out
}

/// Per flow of the runs with several (grouped by point, variant and flow, over seeds): its
/// completion time, its goodput while all flows were active and its share of their sum.
/// Empty when no run has several flows.
pub fn flow_table(records: &[RunRecord]) -> String {
    /// One flow over the seeds of a point: its start, completion times, shared goodputs
    /// and shares.
    #[derive(Default)]
    struct Flow {
        start: f64,
        done: usize,
        dct: Vec<f64>,
        bps: Vec<f64>,
        share: Vec<f64>,
        /// Real-time flows: data received and re-buffering.
        data: Vec<f64>,
        rebuf: Vec<f64>,
    }
    type Key = (String, String, String, u64, String);
    let mut groups: BTreeMap<Key, Flow> = BTreeMap::new();
    for r in records.iter().filter(|r| !r.flows.is_empty()) {
        let total: Option<f64> = r.flows.iter().map(|f| f.shared_goodput_bps).sum();
        for f in &r.flows {
            let key = (
                r.preset.clone(),
                r.variant.clone(),
                f.workload.clone(),
                r.loss.to_bits(),
                f.name.clone(),
            );
            let g = groups.entry(key).or_insert_with(|| Flow {
                start: f.start_s,
                ..Flow::default()
            });
            g.done += usize::from(f.completed);
            if let Some(t) = f.completion_time_s.filter(|_| f.completed) {
                g.dct.push(t);
            }
            g.data.extend(f.app_data_fraction);
            g.rebuf.extend(f.rebuffering_s);
            if let Some(x) = f.shared_goodput_bps {
                g.bps.push(x);
                if let Some(t) = total.filter(|t| *t > 0.0) {
                    g.share.push(x / t);
                }
            }
        }
    }
    if groups.is_empty() {
        return String::new();
    }
    let med = |xs: &[f64], prec: usize| {
        Stats::of(xs).map_or("-".into(), |s| format!("{:.prec$}", s.median))
    };
    let realtime = groups.values().any(|g| !g.data.is_empty());
    let rows: Vec<Vec<String>> = groups
        .iter()
        .map(|((preset, variant, workload, loss, flow), g)| {
            let mut row = vec![
                preset.clone(),
                variant.clone(),
                flow.clone(),
                workload.clone(),
                f64::from_bits(*loss).to_string(),
                format!("{:.1}", g.start),
                g.done.to_string(),
                med(&g.dct, 3),
                med(&g.bps, 0),
                med(&g.share, 3),
            ];
            if realtime {
                row.push(med(&g.data, 4));
                row.push(med(&g.rebuf, 3));
            }
            row
        })
        .collect();
    let mut header: Vec<Col> = vec![
        (None, "preset"),
        (None, "variant"),
        (None, "flow"),
        (None, "workload"),
        (None, "loss"),
        (None, "start_s"),
        (None, "completed"),
        (Some("completion_time_s"), "median"),
        (Some("shared_goodput_bps"), "median"),
        (Some("share"), "median"),
    ];
    if realtime {
        header.extend([
            (Some("app_data_fraction"), "median"),
            (Some("rebuffering_s"), "median"),
        ]);
    }
    render(&header, &rows, 4)
}

/// One line for a link direction: rate, one-way delay, queue and loss models (what its
/// record says, [`crate::metrics::LinkRecord::of`]), as `qfec lab run --dry-run` prints them.
pub fn describe_link(l: &qfec_sim::LinkSpec) -> String {
    use qfec_sim::Serializer;
    let r = crate::metrics::LinkRecord::of(l);
    let rate = match (r.rate_bps, &l.serializer) {
        (Some(bps), _) => format!("{} Mb/s", bps as f64 / 1e6),
        (None, Serializer::Trace(_)) => "trace".to_string(),
        (None, Serializer::Wifi(_)) => "802.11n station".to_string(),
        (None, _) => "no rate limit".to_string(),
    };
    let mut s = format!("{rate}, {} ms, queue {}", r.delay_s * 1e3, r.queue);
    for m in &r.loss {
        s.push_str(&format!(", {m}"));
    }
    if !l.changes.is_empty() {
        s.push_str(&format!(", {} scheduled changes", l.changes.len()));
    }
    s
}

/// The protocol settings a run sets, as `name = value` pairs (unset ones, which take the
/// defaults, left out), as `qfec lab run --dry-run` prints them.
pub fn describe_settings(p: &crate::config::ProtocolSettings) -> String {
    let Ok(serde_json::Value::Object(m)) = serde_json::to_value(p) else {
        return String::new();
    };
    m.into_iter()
        .filter(|(_, v)| !v.is_null() && v.as_object().is_none_or(|o| !o.is_empty()))
        .map(|(k, v)| match v.as_str() {
            Some(text) => format!("{k} = {text}"),
            None => format!("{k} = {v}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::aggregate;

    /// Regression: serde_json's default float parsing could move the last digit
    /// (13238.025206227965 read back as ...963), so `qfec lab merge` changed records.
    #[test]
    fn jsonl_reads_back_every_float_exactly() {
        let mut r = RunRecord {
            down_queue_mean_bytes: 13238.025206227965,
            completion_time_s: Some(0.19432864),
            ..RunRecord::default()
        };
        r.index = 4;
        let mut out = Vec::new();
        write_jsonl(&mut out, std::slice::from_ref(&r)).unwrap();
        let back: Vec<RunRecord> = read_jsonl(std::str::from_utf8(&out).unwrap()).unwrap();
        assert_eq!(back, [r]);
    }

    fn recs() -> Vec<RunRecord> {
        (0..3)
            .map(|i| RunRecord {
                scenario: "a,b".into(),
                preset: "wlan".into(),
                variant: "quic".into(),
                workload: "bulk-20MB".into(),
                loss: 0.02,
                seed: i,
                completed: true,
                completion_time_s: Some(1.0 + i as f64),
                goodput_bps: Some(20e6),
                rtt_trace: vec![(0.0, 0.025)],
                ..RunRecord::default()
            })
            .collect()
    }

    #[test]
    fn csv_quotes_and_counts_columns() {
        let mut buf = Vec::new();
        write_csv(&mut buf, &recs()).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[1].starts_with("\"a,b\",wlan,quic,0.02,0,"));
        let mut buf = Vec::new();
        write_summary_csv(&mut buf, &aggregate(&recs())).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert_eq!(text.lines().count(), 2);
        let cols = text.lines().next().unwrap().split(',').count();
        assert_eq!(cols, 7 + 7 * 11);
    }

    /// On a narrow terminal the table keeps which point, the completions and the median
    /// completion time, leaves out the rest until it fits, and says so; without a width,
    /// or with room, it is whole.
    #[test]
    fn a_table_fits_a_width_by_leaving_out_columns() {
        let mut rs = recs();
        for r in &mut rs {
            r.repair_symbols = 5;
            r.xi = Some(0.9);
        }
        let sums = aggregate(&rs);
        let whole = summary_table(&sums);
        let full_width = whole.lines().map(str::len).max().unwrap();
        assert!(full_width > 150, "{whole}");
        assert_eq!(summary_table_fit(&sums, Some(full_width)), whole);
        assert_eq!(summary_table_fit(&sums, None), whole);
        for width in [80, 100, 120] {
            let t = summary_table_fit(&sums, Some(width));
            let (table, note) = t.trim_end().rsplit_once('\n').unwrap();
            assert!(
                table.lines().all(|l| l.len() <= width),
                "{width}: wider than {width}:\n{t}"
            );
            assert!(
                note.contains("columns left out") && note.contains("--wide"),
                "{t}"
            );
            for kept in [
                "preset",
                "variant",
                "workload",
                "loss",
                "completed",
                "median",
            ] {
                assert!(table.contains(kept), "{width}: {kept} left out:\n{t}");
            }
            assert!(
                table.contains("bulk-20MB") && table.contains(" 2.000"),
                "{t}"
            );
        }
        // Too narrow for what always stays: that much, and no narrower.
        let narrowest = summary_table_fit(&sums, Some(20));
        assert_eq!(
            narrowest.lines().nth(1),
            summary_table_fit(&sums, Some(75)).lines().nth(1)
        );
        assert!(
            narrowest.contains("completed") && narrowest.contains("xi"),
            "{narrowest}"
        );
        // The wider the room, the more columns stay.
        let cols = |w| {
            summary_table_fit(&sums, Some(w))
                .lines()
                .nth(1)
                .unwrap()
                .split_whitespace()
                .count()
        };
        assert!(
            cols(60) <= cols(100) && cols(100) < cols(120),
            "{} {} {}",
            cols(60),
            cols(100),
            cols(120)
        );
    }

    #[test]
    fn jsonl_roundtrip_and_table() {
        let mut buf = Vec::new();
        write_jsonl(&mut buf, &recs()).unwrap();
        let back: Vec<RunRecord> = read_jsonl(std::str::from_utf8(&buf).unwrap()).unwrap();
        assert_eq!(back, recs());
        let t = summary_table(&aggregate(&recs()));
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[1].starts_with("scenario"), "{t}");
        assert!(t.contains("2.000"), "{t}");
        assert_eq!(lines.len(), 4);
        // Each quantity's name (the runs file's, in its unit) ends above its last statistic.
        let end = |line: &str, word: &str| line.find(word).map(|i| i + word.len());
        assert_eq!(
            end(lines[0], "completion_time_s"),
            end(lines[1], "mean"),
            "{t}"
        );
        let second_median = lines[1]
            .match_indices("median")
            .nth(1)
            .map(|(i, m)| i + m.len());
        assert_eq!(end(lines[0], "goodput_bps"), second_median, "{t}");
        assert!(
            lines[3].contains(" 0.02 ") && lines[3].contains(" 20000000 "),
            "{t}"
        );
    }
}
