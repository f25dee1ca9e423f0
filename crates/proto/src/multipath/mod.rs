//! Multipath QUIC (draft-ietf-quic-multipath-21) configuration and the path-scheduler seam:
//! which open paths carry new data, best first. The draft leaves scheduling to the
//! implementation (§5.5); schedulers plug in here, the connection does the rest (per-path
//! packet-number spaces, congestion control, acknowledgements and probing).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::connection::PathId;
use crate::recovery::LossEstimate;
use crate::time::Instant;

mod spread;

/// How a connection uses multipath QUIC. Multipath runs only when both sides advertise it
/// (`initial_max_path_id`); a plain peer gets plain QUIC.
#[derive(Clone, Debug)]
pub struct MultipathConfig {
    /// The `initial_max_path_id` we advertise: with 1, path IDs 0 and 1 may be open at once.
    /// Each path the peer or we abandon raises the limit by one (MAX_PATH_ID), so as many
    /// paths stay possible.
    pub max_path_id: u32,
    /// Which paths carry new data.
    pub scheduler: Arc<dyn SchedulerFactory>,
}

impl Default for MultipathConfig {
    fn default() -> Self {
        MultipathConfig {
            max_path_id: 3,
            scheduler: Scheduler::MinRtt.factory(),
        }
    }
}

/// What a scheduler knows of an open, validated path.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PathView {
    pub id: PathId,
    /// Smoothed RTT (the initial RTT until a sample).
    pub srtt: Duration,
    /// Whether `srtt` comes from a sample.
    pub has_rtt_sample: bool,
    pub cwnd: u64,
    pub bytes_in_flight: u64,
    /// The window gates sending (false: no congestion control, or a window computed only
    /// to be read, [`crate::recovery::cc::Unenforced`]).
    pub window_limits: bool,
    /// The peer asked us to use it only as a backup (PATH_STATUS_BACKUP).
    pub peer_backup: bool,
    /// We marked it backup ([`crate::Connection::set_path_backup`]).
    pub local_backup: bool,
    /// Consecutive probe timeouts without an acknowledgement: above one, the path is
    /// probably broken.
    pub pto_count: u32,
    /// Its measured loss rate and loss-burst length.
    pub loss: LossEstimate,
}

impl PathView {
    /// Either side wants the path used only when no other is.
    pub fn is_backup(&self) -> bool {
        self.peer_backup || self.local_backup
    }

    /// Two probe timeouts in a row without an acknowledgement: likely broken.
    pub fn is_failing(&self) -> bool {
        self.pto_count >= 2
    }

    /// Bytes its congestion window has room for (`cwnd - bytes_in_flight`, at least 0).
    pub fn window_room(&self) -> u64 {
        self.cwnd.saturating_sub(self.bytes_in_flight)
    }

    /// Bytes it may send now as far as the window goes: `window_room`, unlimited when the
    /// window does not gate sending.
    pub fn room(&self) -> u64 {
        if self.window_limits {
            self.window_room()
        } else {
            u64::MAX
        }
    }
}

/// What a connection extension says of the next data packet it adds to (for example which
/// block of an erasure code it belongs to, and whether it is a repair symbol), for a
/// scheduler that places packets by what they carry
/// ([`crate::connection::ConnectionExtension::next_packet_hint`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketHint {
    /// The group the packet belongs to (a source block), numbered by the extension.
    pub group: u64,
    /// Source packets per group; 0 when the extension does not send in groups (a sliding
    /// window code).
    pub sources: u32,
    /// Repair packets per group.
    pub repairs: u32,
    /// It is a repair packet.
    pub repair: bool,
    /// After this the packet is of no use to the peer, if it has a deadline.
    pub deadline: Option<Instant>,
}

/// What a scheduler may use beside the paths.
pub struct SchedulerCx<'a> {
    pub now: Instant,
    /// The connection's seeded generator: the only randomness a scheduler may use.
    pub rng: &'a mut dyn rand::RngCore,
    /// What the next data packet carries, as an extension tells it.
    pub next_packet: Option<PacketHint>,
}

/// Chooses the paths new data may go on. Probes, acknowledgements and path validation are
/// not its business: the connection sends those on the path they belong to.
pub trait PathScheduler: Send + fmt::Debug {
    /// Writes into `order` the paths of `paths` (open and validated) that may carry new data
    /// now, best first. The connection sends on the first whose congestion window and pacer
    /// allow it.
    fn rank(&mut self, cx: &mut SchedulerCx<'_>, paths: &[PathView], order: &mut Vec<PathId>);

    /// A packet with new data left on `path`; `packet` is the hint `rank` was given for it.
    fn on_sent(&mut self, _path: PathId, _packet: Option<&PacketHint>) {}

    /// Whether the scheduler chooses a path per packet: the connection then asks it before
    /// every datagram, never sending a batch of them on one path.
    fn per_packet(&self) -> bool {
        false
    }

    /// Whether every data packet goes on each path `rank` returned: the first path that can
    /// send takes it, and each of the others sends a copy of its data frames (STREAM,
    /// DATAGRAM and an extension's, not acknowledgements or control frames) as soon as its
    /// own window and pacer allow.
    fn replicates(&self) -> bool {
        false
    }
}

/// Builds a scheduler per connection.
pub trait SchedulerFactory: Send + Sync + fmt::Debug {
    fn build(&self) -> Box<dyn PathScheduler>;
    fn name(&self) -> &'static str;
}

/// The built-in schedulers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheduler {
    /// Every usable path, lowest smoothed RTT first (the default of Multipath TCP): data
    /// goes on the fastest path whose window has room. Backup paths and paths that look
    /// broken only when nothing else is usable.
    MinRtt,
    /// One path at a time: the oldest non-backup path that does not look broken; the next
    /// one takes over when it fails or is abandoned.
    Backup,
    /// The first path only (the lowest path ID open), whatever its state: the single-path
    /// baseline of a multipath experiment.
    Single,
    /// Each packet on the next usable path in turn, skipping paths whose window is full.
    RoundRobin,
    /// Paper 002's HighRB: each packet on a path drawn at random, weighted by its window's
    /// room.
    HighRb,
    /// Ours: an erasure code's symbols placed by each path's measured loss pattern so that
    /// each block stays decodable; repair on time.
    FecAware,
    /// Every packet on every usable path: the lowest smoothed RTT takes it first, each other
    /// path sends a copy when its window allows.
    Redundant,
}

impl Scheduler {
    pub const ALL: [Scheduler; 7] = [
        Scheduler::MinRtt,
        Scheduler::Backup,
        Scheduler::Single,
        Scheduler::RoundRobin,
        Scheduler::HighRb,
        Scheduler::FecAware,
        Scheduler::Redundant,
    ];

    pub fn factory(self) -> Arc<dyn SchedulerFactory> {
        Arc::new(self)
    }

    pub fn name(self) -> &'static str {
        match self {
            Scheduler::MinRtt => "minrtt",
            Scheduler::Backup => "backup",
            Scheduler::Single => "single",
            Scheduler::RoundRobin => "rr",
            Scheduler::HighRb => "highrb",
            Scheduler::FecAware => "fec-aware",
            Scheduler::Redundant => "redundant",
        }
    }
}

impl std::fmt::Display for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Scheduler {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Scheduler::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown scheduler {s:?}: use minrtt, backup, single, rr, highrb, fec-aware or redundant"
                )
            })
    }
}

impl SchedulerFactory for Scheduler {
    fn build(&self) -> Box<dyn PathScheduler> {
        match self {
            Scheduler::MinRtt => Box::new(MinRtt),
            Scheduler::Backup => Box::new(ActiveBackup),
            Scheduler::Single => Box::new(Single),
            Scheduler::RoundRobin => Box::new(spread::RoundRobin::default()),
            Scheduler::HighRb => Box::new(spread::HighRb),
            Scheduler::FecAware => Box::new(spread::FecAware::default()),
            Scheduler::Redundant => Box::new(Redundant),
        }
    }

    fn name(&self) -> &'static str {
        Scheduler::name(*self)
    }
}

/// The preference tiers both schedulers share: healthy available paths, then healthy backup
/// paths, then failing ones; only the best non-empty tier is used.
fn best_tier(paths: &[PathView]) -> impl Iterator<Item = &PathView> {
    let tier = |p: &PathView| match (p.is_failing(), p.is_backup()) {
        (false, false) => 0,
        (false, true) => 1,
        (true, _) => 2,
    };
    let best = paths.iter().map(tier).min().unwrap_or(0);
    paths.iter().filter(move |p| tier(p) == best)
}

#[derive(Debug)]
struct MinRtt;

impl PathScheduler for MinRtt {
    fn rank(&mut self, _cx: &mut SchedulerCx<'_>, paths: &[PathView], order: &mut Vec<PathId>) {
        let mut usable: Vec<&PathView> = best_tier(paths).collect();
        // A path without a sample yet ranks after those with one (its RTT is a guess).
        usable.sort_by_key(|p| (!p.has_rtt_sample, p.srtt, p.id));
        order.extend(usable.into_iter().map(|p| p.id));
    }
}

/// Every usable path, lowest smoothed RTT first (as `MinRtt` ranks them), each carrying
/// every data packet.
#[derive(Debug)]
struct Redundant;

impl PathScheduler for Redundant {
    fn rank(&mut self, cx: &mut SchedulerCx<'_>, paths: &[PathView], order: &mut Vec<PathId>) {
        MinRtt.rank(cx, paths, order);
    }

    fn per_packet(&self) -> bool {
        true
    }

    fn replicates(&self) -> bool {
        true
    }
}

#[derive(Debug)]
struct ActiveBackup;

impl PathScheduler for ActiveBackup {
    fn rank(&mut self, _cx: &mut SchedulerCx<'_>, paths: &[PathView], order: &mut Vec<PathId>) {
        // The oldest path of the best tier: path IDs grow as paths open.
        if let Some(p) = best_tier(paths).min_by_key(|p| p.id) {
            order.push(p.id);
        }
    }
}

#[derive(Debug)]
struct Single;

impl PathScheduler for Single {
    fn rank(&mut self, _cx: &mut SchedulerCx<'_>, paths: &[PathView], order: &mut Vec<PathId>) {
        order.extend(paths.iter().map(|p| p.id).min());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(id: u32, rtt_ms: u64) -> PathView {
        PathView {
            id: PathId(id),
            srtt: Duration::from_millis(rtt_ms),
            has_rtt_sample: true,
            cwnd: 12_000,
            bytes_in_flight: 0,
            window_limits: true,
            peer_backup: false,
            local_backup: false,
            pto_count: 0,
            loss: LossEstimate::default(),
        }
    }

    fn rank(s: Scheduler, paths: &[PathView]) -> Vec<u32> {
        let mut order = Vec::new();
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(1);
        let mut cx = SchedulerCx {
            now: Instant::ZERO,
            rng: &mut rng,
            next_packet: None,
        };
        s.build().rank(&mut cx, paths, &mut order);
        order.into_iter().map(|p| p.0).collect()
    }

    #[test]
    fn minrtt_orders_by_smoothed_rtt_and_keeps_backups_for_last_resort() {
        let mut paths = [view(0, 80), view(1, 20), view(2, 50)];
        assert_eq!(rank(Scheduler::MinRtt, &paths), [1, 2, 0]);
        paths[1].peer_backup = true;
        assert_eq!(rank(Scheduler::MinRtt, &paths), [2, 0]);
        paths[0].pto_count = 3;
        paths[2].pto_count = 2;
        assert_eq!(rank(Scheduler::MinRtt, &paths), [1], "backup takes over");
        paths[1].local_backup = true;
        paths[1].pto_count = 2;
        assert_eq!(rank(Scheduler::MinRtt, &paths), [1, 2, 0], "all failing");
    }

    #[test]
    fn minrtt_puts_paths_without_a_sample_after_measured_ones() {
        let mut paths = [view(0, 300), view(1, 20)];
        paths[1].has_rtt_sample = false;
        paths[1].srtt = Duration::from_millis(1);
        assert_eq!(rank(Scheduler::MinRtt, &paths), [0, 1]);
    }

    #[test]
    fn backup_uses_one_path_until_it_fails() {
        let mut paths = [view(0, 80), view(1, 20)];
        assert_eq!(rank(Scheduler::Backup, &paths), [0]);
        paths[0].pto_count = 2;
        assert_eq!(rank(Scheduler::Backup, &paths), [1]);
        paths[0].pto_count = 0;
        paths[0].local_backup = true;
        assert_eq!(rank(Scheduler::Backup, &paths), [1]);
        assert!(rank(Scheduler::Backup, &[]).is_empty());
    }

    /// Where `n` packets go, one rank and one send at a time.
    fn place(
        s: &mut dyn PathScheduler,
        paths: &[PathView],
        hints: impl Fn(usize) -> Option<PacketHint>,
        n: usize,
    ) -> Vec<u32> {
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(7);
        let mut out = Vec::new();
        for i in 0..n {
            let mut order = Vec::new();
            let hint = hints(i);
            let mut cx = SchedulerCx {
                now: Instant::ZERO,
                rng: &mut rng,
                next_packet: hint,
            };
            s.rank(&mut cx, paths, &mut order);
            let first = order[0];
            s.on_sent(first, hint.as_ref());
            out.push(first.0);
        }
        out
    }

    #[test]
    fn single_keeps_to_the_first_path() {
        let mut paths = [view(0, 300), view(1, 20)];
        assert_eq!(rank(Scheduler::Single, &paths), [0]);
        paths[0].pto_count = 5;
        assert_eq!(rank(Scheduler::Single, &paths), [0], "even when it fails");
        assert_eq!(
            rank(Scheduler::Single, &paths[1..]),
            [1],
            "path 0 abandoned"
        );
    }

    #[test]
    fn round_robin_alternates_and_skips_full_windows() {
        let mut paths = [view(0, 30), view(1, 80), view(2, 10)];
        let mut rr = Scheduler::RoundRobin.build();
        assert!(rr.per_packet());
        assert_eq!(place(&mut *rr, &paths, |_| None, 6), [0, 1, 2, 0, 1, 2]);
        paths[1].bytes_in_flight = paths[1].cwnd;
        assert_eq!(place(&mut *rr, &paths, |_| None, 4), [0, 2, 0, 2]);
        paths[1].local_backup = true;
        paths[1].bytes_in_flight = 0;
        assert_eq!(
            place(&mut *rr, &paths, |_| None, 2),
            [0, 2],
            "backup unused"
        );
    }

    #[test]
    fn highrb_draws_paths_by_window_room() {
        let mut paths = [view(0, 30), view(1, 30)];
        paths[0].cwnd = 12_000;
        paths[0].bytes_in_flight = 3_000;
        paths[1].cwnd = 4_000;
        paths[1].bytes_in_flight = 1_000;
        let mut s = Scheduler::HighRb.build();
        let n = 4000;
        let on0 = place(&mut *s, &paths, |_| None, n)
            .iter()
            .filter(|&&p| p == 0)
            .count() as f64;
        // Weights 9000 : 3000.
        assert!((on0 / n as f64 - 0.75).abs() < 0.03, "{on0}");
        // A window computed but not enforced still weighs.
        paths[0].window_limits = false;
        paths[1].window_limits = false;
        let on0 = place(&mut *s, &paths, |_| None, n)
            .iter()
            .filter(|&&p| p == 0)
            .count() as f64;
        assert!((on0 / n as f64 - 0.75).abs() < 0.03, "{on0}");
        // No room anywhere: equal weights.
        paths[0].bytes_in_flight = 12_000;
        paths[1].bytes_in_flight = 4_000;
        let on0 = place(&mut *s, &paths, |_| None, n)
            .iter()
            .filter(|&&p| p == 0)
            .count() as f64;
        assert!((on0 / n as f64 - 0.5).abs() < 0.03, "{on0}");
    }

    /// A loss estimate backed by plenty of packets.
    fn measured(rate: f64, mean_burst: f64) -> LossEstimate {
        LossEstimate {
            rate,
            mean_burst,
            samples: 1000.0,
            isolated: 0.0,
        }
    }

    fn rs_hint(i: usize) -> Option<PacketHint> {
        // RS(30, 20): 20 sources then 10 repairs per block.
        let (group, index) = (i / 30, i % 30);
        Some(PacketHint {
            group: group as u64,
            sources: 20,
            repairs: 10,
            repair: index >= 20,
            deadline: None,
        })
    }

    #[test]
    fn fec_aware_interleaves_like_paths_and_avoids_a_lossy_one() {
        let mut paths = [view(0, 30), view(1, 30)];
        let mut s = Scheduler::FecAware.build();
        let placed = place(&mut *s, &paths, rs_hint, 60);
        // Nothing measured yet: the second path carries no more of a block than the code
        // repairs (10 of 30), spread over the block.
        assert_eq!(placed.iter().filter(|&&p| p == 1).count(), 20, "{placed:?}");
        assert!(!placed.windows(3).any(|w| w == [1, 1, 1]), "{placed:?}");
        // Both measured and lossless: half on each, interleaved.
        for p in paths.iter_mut() {
            p.loss.samples = 1000.0;
        }
        let placed = place(&mut *s, &paths, |i| rs_hint(i + 60), 60);
        assert_eq!(placed.iter().filter(|&&p| p == 0).count(), 30);
        assert!(placed.windows(2).all(|w| w[0] != w[1]), "{placed:?}");
        // Path 0 loses 20 % in long bursts, path 1 0.1 % in single losses.
        paths[0].loss = measured(0.2, 10.0);
        paths[1].loss = measured(0.001, 1.0);
        let placed = place(&mut *s, &paths, |i| rs_hint(i + 120), 30);
        assert!(
            placed.iter().filter(|&&p| p == 0).count() <= 3,
            "{placed:?}"
        );
        // Its window full, the good path is skipped rather than waited for.
        paths[1].bytes_in_flight = paths[1].cwnd;
        assert_eq!(place(&mut *s, &paths, |i| rs_hint(i + 150), 1), [0]);
    }

    #[test]
    fn fec_aware_without_blocks_uses_every_path_as_minrtt() {
        // Regression: without blocks it kept to the least lossy path, leaving the other's
        // capacity unused in a bulk download.
        let mut paths = [view(0, 30), view(1, 60)];
        paths[0].loss = measured(0.02, 1.0);
        paths[1].loss = measured(0.01, 1.0);
        assert_eq!(rank(Scheduler::FecAware, &paths), [0, 1]);
        assert_eq!(
            rank(Scheduler::FecAware, &paths),
            rank(Scheduler::MinRtt, &paths)
        );
    }

    #[test]
    fn fec_aware_sends_a_repair_where_it_arrives_in_time() {
        let paths = [view(0, 400), view(1, 40)];
        let mut s = Scheduler::FecAware.build();
        let late = |i: usize| {
            rs_hint(i).map(|h| PacketHint {
                deadline: h.repair.then(|| Instant::ZERO + Duration::from_millis(100)),
                ..h
            })
        };
        let placed = place(&mut *s, &paths, late, 30);
        assert!(placed[20..].iter().all(|&p| p == 1), "{placed:?}");
    }

    #[test]
    fn names_round_trip() {
        for s in Scheduler::ALL {
            assert_eq!(s.name().parse::<Scheduler>().unwrap(), s);
        }
        assert!(
            "fastest"
                .parse::<Scheduler>()
                .unwrap_err()
                .contains("minrtt")
        );
    }
}
