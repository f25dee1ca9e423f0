//! The loss-recovery state of a path (RFC 9002): probe-timeout backoff, the loss and pacing
//! timers, the first RTT sample (for persistent congestion), the permission to send one
//! packet beyond the window when recovery starts, whether the sender is application-limited,
//! and the losses behind the last window reduction (undone when they all turn out delivered
//! or recovered by the peer's FEC in mask mode). The procedures that act on it with the
//! packet-number spaces are in `loss.rs`.

use crate::time::Instant;

/// The losses behind the last reduction of the congestion window and those declared after
/// it without a further reduction, so that the reduction can be undone in mask mode: once
/// every one turned out delivered (a spurious loss) or recovered by the peer, and at least one
/// was a recovery hidden from congestion control. A lost in-flight packet whose content is not
/// kept (padding only) is never explained: its loss stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LossEpisode {
    /// In-flight packets declared lost, not yet explained.
    pub unexplained: Vec<u64>,
    /// At least one was a recovery hidden from congestion control (mask mode).
    pub masked: bool,
}

/// Loss recovery of one path.
#[derive(Debug, Clone, Default)]
pub(super) struct Recovery {
    /// Probe timeouts in a row without an acknowledgement (the PTO backoff exponent).
    pub pto_count: u32,
    /// Time of the first RTT sample, for persistent congestion.
    pub first_rtt_sample: Option<Instant>,
    /// When loss detection next runs: the earliest loss time, else the probe timeout.
    pub loss_timer: Option<Instant>,
    /// When the pacer lets the next packet go.
    pub pacing_timer: Option<Instant>,
    /// A loss just started a recovery period: one packet may exceed the window.
    pub recovery_packet_allowed: bool,
    /// The sender has no data to fill the window (the controller must not grow it).
    pub app_limited: bool,
    /// The losses behind the last window reduction.
    pub loss_episode: Option<LossEpisode>,
    /// A reduction whose losses all turn out spurious is undone too (adaptive reordering),
    /// not only one with a masked recovery among them.
    pub undo_spurious: bool,
}

impl Recovery {
    /// The PTO multiplier: 2 to the number of probe timeouts in a row (bounded).
    pub fn pto_backoff(&self) -> u32 {
        2u32.saturating_pow(self.pto_count.min(16))
    }

    /// A CE mark the peer reported reduced the window (`reduced`), or came within the
    /// recovery period: nothing was lost, so nothing can undo the reduction.
    pub fn on_ce_reduction(&mut self, reduced: bool) {
        if reduced {
            self.recovery_packet_allowed = true;
            self.loss_episode = None;
        }
    }

    /// A window reduction for `lost` (`persistent`: persistent congestion, which is never
    /// undone), or, without a reduction, more losses of the same recovery period.
    pub fn on_congestion_event(&mut self, reduced: bool, persistent: bool, lost: Vec<u64>) {
        if reduced {
            self.recovery_packet_allowed = true;
            self.loss_episode = (!persistent).then_some(LossEpisode {
                unexplained: lost,
                masked: false,
            });
        } else if let Some(ep) = self.loss_episode.as_mut() {
            // Losses in the same recovery period: the reduction stands for them too.
            ep.unexplained.extend(lost);
        }
    }

    /// Packet `pn` of the last loss episode turned out delivered (a spurious loss) or
    /// recovered by the peer (`masked`). Returns true when that explained the episode's last
    /// loss and one of them was masked, or all were spurious and `undo_spurious` is set: the
    /// window reduction is to be undone.
    pub fn explain_loss(&mut self, pn: u64, masked: bool) -> bool {
        let Some(ep) = self.loss_episode.as_mut() else {
            return false;
        };
        let Some(i) = ep.unexplained.iter().position(|&p| p == pn) else {
            return false;
        };
        ep.unexplained.swap_remove(i);
        ep.masked |= masked;
        if !ep.unexplained.is_empty() {
            return false;
        }
        let masked = ep.masked;
        self.loss_episode = None;
        masked || self.undo_spurious
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_episode_is_undone_once_every_loss_is_explained_and_one_was_masked() {
        let mut r = Recovery::default();
        r.on_congestion_event(true, false, vec![3, 5]);
        assert!(r.recovery_packet_allowed);
        r.on_congestion_event(false, false, vec![6]);
        assert!(!r.explain_loss(5, true));
        assert!(!r.explain_loss(9, true), "not of this episode");
        assert!(!r.explain_loss(3, false));
        assert!(
            r.explain_loss(6, false),
            "the last one: undo, one was masked"
        );
        assert!(r.loss_episode.is_none());
        // All spurious, none masked: nothing to undo here.
        r.on_congestion_event(true, false, vec![7]);
        assert!(!r.explain_loss(7, false));
        // Persistent congestion is never undone.
        r.on_congestion_event(true, true, vec![8]);
        assert!(!r.explain_loss(8, true));
    }

    #[test]
    fn with_adaptive_reordering_an_all_spurious_episode_is_undone() {
        let mut r = Recovery {
            undo_spurious: true,
            ..Recovery::default()
        };
        r.on_congestion_event(true, false, vec![3, 5]);
        assert!(!r.explain_loss(3, false));
        assert!(
            r.explain_loss(5, false),
            "every loss was delivered after all"
        );
        // A loss that stays unexplained keeps the reduction.
        r.on_congestion_event(true, false, vec![7, 8]);
        assert!(!r.explain_loss(7, false));
        assert!(r.loss_episode.is_some());
        // Persistent congestion is never undone.
        r.on_congestion_event(true, true, vec![9]);
        assert!(!r.explain_loss(9, false));
    }

    #[test]
    fn the_backoff_doubles_and_stays_bounded() {
        let mut r = Recovery::default();
        assert_eq!(r.pto_backoff(), 1);
        r.pto_count = 3;
        assert_eq!(r.pto_backoff(), 8);
        r.pto_count = 40;
        assert_eq!(r.pto_backoff(), 1 << 16);
    }
}
