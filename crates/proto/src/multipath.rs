//! Multipath QUIC (draft-ietf-quic-multipath-21) configuration and the path-scheduler seam:
//! which open paths carry new data, best first. The draft leaves scheduling to the
//! implementation (§5.5); schedulers plug in here, the connection does the rest (per-path
//! packet-number spaces, congestion control, acknowledgements and probing).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::connection::PathId;

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
    /// The peer asked us to use it only as a backup (PATH_STATUS_BACKUP).
    pub peer_backup: bool,
    /// We marked it backup ([`crate::Connection::set_path_backup`]).
    pub local_backup: bool,
    /// Consecutive probe timeouts without an acknowledgement: above one, the path is
    /// probably broken.
    pub pto_count: u32,
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
}

/// Chooses the paths new data may go on. Probes, acknowledgements and path validation are
/// not its business: the connection sends those on the path they belong to.
pub trait PathScheduler: Send + fmt::Debug {
    /// Writes into `order` the paths of `paths` (open and validated) that may carry new data
    /// now, best first. The connection sends on the first whose congestion window and pacer
    /// allow it.
    fn rank(&mut self, paths: &[PathView], order: &mut Vec<PathId>);
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
}

impl Scheduler {
    pub const ALL: [Scheduler; 2] = [Scheduler::MinRtt, Scheduler::Backup];

    pub fn factory(self) -> Arc<dyn SchedulerFactory> {
        Arc::new(self)
    }

    pub fn name(self) -> &'static str {
        match self {
            Scheduler::MinRtt => "minrtt",
            Scheduler::Backup => "backup",
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
            .ok_or_else(|| format!("unknown scheduler {s:?}: use minrtt or backup"))
    }
}

impl SchedulerFactory for Scheduler {
    fn build(&self) -> Box<dyn PathScheduler> {
        match self {
            Scheduler::MinRtt => Box::new(MinRtt),
            Scheduler::Backup => Box::new(ActiveBackup),
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
    fn rank(&mut self, paths: &[PathView], order: &mut Vec<PathId>) {
        let mut usable: Vec<&PathView> = best_tier(paths).collect();
        // A path without a sample yet ranks after those with one (its RTT is a guess).
        usable.sort_by_key(|p| (!p.has_rtt_sample, p.srtt, p.id));
        order.extend(usable.into_iter().map(|p| p.id));
    }
}

#[derive(Debug)]
struct ActiveBackup;

impl PathScheduler for ActiveBackup {
    fn rank(&mut self, paths: &[PathView], order: &mut Vec<PathId>) {
        // The oldest path of the best tier: path IDs grow as paths open.
        if let Some(p) = best_tier(paths).min_by_key(|p| p.id) {
            order.push(p.id);
        }
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
            peer_backup: false,
            local_backup: false,
            pto_count: 0,
        }
    }

    fn rank(s: Scheduler, paths: &[PathView]) -> Vec<u32> {
        let mut order = Vec::new();
        s.build().rank(paths, &mut order);
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
