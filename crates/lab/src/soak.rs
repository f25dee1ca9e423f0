//! The soak: downloads through the simulator under every impairment at once (loss, bursts,
//! reordering, duplication, corruption, path failures, NAT rebindings), with and without
//! FEC, each byte checked by the client against what the server sent (see
//! [`crate::quic::Content`]). `qfec lab soak --bytes 10GB` runs it; a short one runs in
//! `cargo test`.
//!
//! A run counts its bytes as verified only if it completed without an error with exactly the
//! requested bytes read: a byte at a wrong offset, on a wrong stream or corrupted ends the
//! run with an error (bad), a short read is missing bytes, a long one duplicated bytes.

use std::time::Duration;

use qfec_fec::parse_fec;
use qfec_sim::{Jitter, LinkChange, LinkSpec, LossSpec, QueueLimit};

use crate::campaign::RunSpec;
use crate::config::ProtocolSettings;
use crate::metrics::RunRecord;
use crate::presets::LinkPair;
use crate::workload::Workload;

/// Largest download of one soak run.
pub const MAX_RUN_BYTES: u64 = 100_000_000;
/// Smallest download of one soak run.
pub const MIN_RUN_BYTES: u64 = 1_000_000;

/// What a soak condition puts on the links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// Random loss, reordering, duplication and corruption on one path.
    Impaired,
    /// Gilbert-Elliott loss bursts with duplication on one path.
    Bursty,
    /// NAT rebindings of the client during the download, with loss and reordering.
    Rebinding,
    /// Two paths (multipath QUIC), each failing for a while in turn, with loss and
    /// reordering.
    PathFailures,
    /// Two paths, duplication and corruption, and a NAT rebinding of the first.
    MultipathRebinding,
}

impl Condition {
    pub const ALL: [Condition; 5] = [
        Condition::Impaired,
        Condition::Bursty,
        Condition::Rebinding,
        Condition::PathFailures,
        Condition::MultipathRebinding,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Condition::Impaired => "impaired",
            Condition::Bursty => "bursty",
            Condition::Rebinding => "rebinding",
            Condition::PathFailures => "path-failures",
            Condition::MultipathRebinding => "multipath-rebinding",
        }
    }
}

/// One direction of a soak path: `rate` b/s, `delay` one way, a BDP queue, `loss`.
fn direction(name: &str, rate: u64, delay: Duration, loss: LossSpec) -> LinkSpec {
    let mut l = LinkSpec::new(name, rate, delay)
        .queue_bdp(delay * 2)
        .air_loss(loss);
    l.queue = match l.queue {
        QueueLimit::Bytes(b) => QueueLimit::Bytes(b.max(64 * 1500)),
        q => q,
    };
    l
}

fn pair(name: &str, rate: u64, delay: Duration, loss: LossSpec) -> LinkPair {
    LinkPair {
        down: direction(&format!("{name}-down"), rate, delay, loss.clone()),
        up: direction(&format!("{name}-up"), rate / 4, delay, loss),
    }
}

fn reorder(l: &mut LinkSpec, max: Duration) {
    l.jitter = Jitter::Uniform(max);
    l.allow_reorder = true;
}

fn blackhole(l: &mut LinkSpec, from: Duration, to: Duration) {
    l.changes.push((at(from), LinkChange::Blackhole(true)));
    l.changes.push((at(to), LinkChange::Blackhole(false)));
}

fn at(d: Duration) -> qfec_proto::Instant {
    qfec_proto::Instant::from_nanos(d.as_nanos() as u64)
}

/// The links, extra paths and rebindings of `condition`.
fn network(condition: Condition) -> (LinkPair, Vec<LinkPair>, Vec<Duration>) {
    let ms = Duration::from_millis;
    let bernoulli = |p| LossSpec::Bernoulli { p };
    match condition {
        Condition::Impaired => {
            let mut l = pair("path0", 100_000_000, ms(10), bernoulli(0.01));
            for d in [&mut l.down, &mut l.up] {
                reorder(d, ms(2));
                d.duplicate = 0.01;
                d.corrupt = 0.005;
            }
            (l, Vec::new(), Vec::new())
        }
        Condition::Bursty => {
            let ge = LossSpec::GilbertElliott {
                p: 0.005,
                r: 0.3,
                h: 0.2,
                k: 1.0,
            };
            let mut l = pair("path0", 50_000_000, ms(20), ge);
            l.down.duplicate = 0.005;
            (l, Vec::new(), Vec::new())
        }
        Condition::Rebinding => {
            let mut l = pair("path0", 100_000_000, ms(10), bernoulli(0.005));
            reorder(&mut l.down, ms(1));
            (l, Vec::new(), vec![ms(700), ms(1900), ms(3100), ms(5000)])
        }
        Condition::PathFailures => {
            let mut first = pair("path0", 60_000_000, ms(10), bernoulli(0.005));
            let mut second = pair("path1", 40_000_000, ms(25), bernoulli(0.005));
            reorder(&mut first.down, ms(1));
            reorder(&mut second.down, ms(2));
            for d in [&mut first.down, &mut first.up] {
                blackhole(d, ms(1000), ms(3000));
            }
            for d in [&mut second.down, &mut second.up] {
                blackhole(d, ms(4000), ms(5500));
            }
            (first, vec![second], Vec::new())
        }
        Condition::MultipathRebinding => {
            let mut first = pair("path0", 60_000_000, ms(10), bernoulli(0.003));
            let mut second = pair("path1", 40_000_000, ms(25), bernoulli(0.003));
            for d in [
                &mut first.down,
                &mut first.up,
                &mut second.down,
                &mut second.up,
            ] {
                d.duplicate = 0.01;
                d.corrupt = 0.002;
            }
            (first, vec![second], vec![ms(1500)])
        }
    }
}

/// The soak's runs: at least `bytes` in all, downloads of [`MIN_RUN_BYTES`] to
/// [`MAX_RUN_BYTES`] cycling through every condition, without FEC and with RLC in turn, so
/// that each pair comes at least once. `seed` makes a different soak.
pub fn plan(bytes: u64, seed: u64) -> Vec<RunSpec> {
    let kinds = Condition::ALL.len() as u64 * 2;
    let per_run = (bytes / kinds).clamp(MIN_RUN_BYTES, MAX_RUN_BYTES);
    let runs = bytes.div_ceil(per_run).max(kinds);
    let rlc = parse_fec("rlc").expect("a built-in FEC setting");
    (0..runs)
        .map(|i| {
            let condition = Condition::ALL[(i / 2) as usize % Condition::ALL.len()];
            let fec = if i % 2 == 1 { rlc } else { None };
            let (links, extra_paths, rebindings) = network(condition);
            let variant = format!(
                "{}/{}",
                condition.name(),
                if fec.is_some() { "rlc" } else { "none" }
            );
            RunSpec {
                index: i as usize,
                scenario: "soak".into(),
                preset: None,
                variant,
                loss: 0.0,
                seed: seed.wrapping_mul(1_000_003).wrapping_add(i),
                links,
                workload: Workload::Bulk { bytes: per_run },
                protocol: ProtocolSettings {
                    fec,
                    ..ProtocolSettings::default()
                },
                // RLC over these reordering links ran near 1 Mb/s when measured (20 MB,
                // 100 Mb/s, 1 ms jitter: 151 s): the limit is for stalls, not slowness.
                duration_limit: Duration::from_secs(3600),
                flows: Vec::new(),
                extra_paths,
                rebindings,
            }
        })
        .collect()
}

/// What a soak run delivered, against what it asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Bytes read in order and matching the content.
    pub verified: u64,
    /// Runs that ended with an error (a wrong byte among them) or did not complete.
    pub failed_runs: u64,
    /// Bytes asked for and never read.
    pub missing: u64,
    /// Bytes read beyond what was asked for.
    pub duplicated: u64,
}

impl Verdict {
    /// The verdict on one run of `spec`.
    pub fn of(spec: &RunSpec, rec: &RunRecord) -> Verdict {
        let asked = match spec.workload {
            Workload::Bulk { bytes } => bytes,
            _ => 0,
        };
        let ok = rec.error.is_none() && rec.completed;
        Verdict {
            verified: if ok && rec.app_bytes == asked {
                asked
            } else {
                0
            },
            failed_runs: u64::from(!ok),
            missing: asked.saturating_sub(rec.app_bytes),
            duplicated: rec.app_bytes.saturating_sub(asked),
        }
    }

    pub fn add(&mut self, o: Verdict) {
        self.verified += o.verified;
        self.failed_runs += o.failed_runs;
        self.missing += o.missing;
        self.duplicated += o.duplicated;
    }

    /// Nothing bad, missing or duplicated.
    pub fn clean(&self) -> bool {
        self.failed_runs == 0 && self.missing == 0 && self.duplicated == 0
    }
}
