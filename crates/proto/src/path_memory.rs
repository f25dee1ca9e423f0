//! What an endpoint remembers of the paths to the peers it talked with: each peer IP
//! address's loss pattern ([`LossEstimate`]), learned from the connections that ended, so
//! that the next connection to or from that address starts from what the path showed
//! before instead of from nothing (a host's per-destination metrics, as TCP stacks keep
//! them). A server also seals the estimate into the NEW_TOKEN tokens it gives (see
//! `Endpoint`), so that it comes back with the client's next connection even to another
//! instance or after a restart.
//!
//! The memory is bounded: at most `capacity` addresses (the least recently updated one
//! goes), each forgotten `lifetime` after its last update.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use crate::Instant;
use crate::recovery::LossEstimate;

/// Packets an address's estimate is worth at most: newer connections keep a say however
/// long the history.
pub const MAX_REMEMBERED_SAMPLES: f64 = 1000.0;

/// The loss pattern of the paths to each peer address.
#[derive(Debug, Clone)]
pub struct PathMemory {
    entries: BTreeMap<IpAddr, Entry>,
    capacity: usize,
    lifetime: Duration,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    loss: LossEstimate,
    updated: Instant,
}

impl PathMemory {
    pub fn new(capacity: usize, lifetime: Duration) -> PathMemory {
        PathMemory {
            entries: BTreeMap::new(),
            capacity,
            lifetime,
        }
    }

    /// What the paths to `ip` showed, if anything was learned within the lifetime.
    pub fn get(&self, now: Instant, ip: IpAddr) -> Option<LossEstimate> {
        let e = self.entries.get(&ip.to_canonical())?;
        (now.saturating_duration_since(e.updated) <= self.lifetime && e.updated <= now)
            .then_some(e.loss)
    }

    /// Adds what a connection's path to `ip` showed to what was known.
    pub fn record(&mut self, now: Instant, ip: IpAddr, loss: LossEstimate) {
        if self.capacity == 0 || loss.samples.is_nan() || loss.samples <= 0.0 {
            return;
        }
        let ip = ip.to_canonical();
        let loss = merge(self.get(now, ip).unwrap_or_default(), loss);
        if !self.entries.contains_key(&ip) && self.entries.len() >= self.capacity {
            // The least recently updated address goes (ties: the lowest address).
            if let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(ip, e)| (e.updated, **ip))
                .map(|(ip, _)| *ip)
            {
                self.entries.remove(&oldest);
            }
        }
        self.entries.insert(ip, Entry { loss, updated: now });
    }

    /// Addresses remembered (expired ones included until they are replaced).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Two estimates of one path as one: losses, bursts and packets add up, the older estimate
/// first scaled down so that the sum stays within [`MAX_REMEMBERED_SAMPLES`] packets.
pub fn merge(old: LossEstimate, new: LossEstimate) -> LossEstimate {
    let (ns, nr, nb) = clean(new);
    let (os, or, ob) = clean(old);
    let keep = (MAX_REMEMBERED_SAMPLES - ns).max(0.0).min(os);
    let scale = if os > 0.0 { keep / os } else { 0.0 };
    let samples = ns + keep;
    let lost = ns * nr + os * or * scale;
    let bursts = ns * nr / nb + os * or * scale / ob;
    let isolated = if lost > 0.0 {
        (ns * nr * clean_share(new.isolated) + os * or * scale * clean_share(old.isolated)) / lost
    } else {
        0.0
    };
    LossEstimate {
        rate: if samples > 0.0 { lost / samples } else { 0.0 },
        mean_burst: if bursts > 0.0 {
            (lost / bursts).max(1.0)
        } else {
            1.0
        },
        samples,
        isolated,
    }
}

/// A share in [0, 1] (0 when not a number).
fn clean_share(x: f64) -> f64 {
    if x.is_finite() {
        x.clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// (packets, rate, mean burst) of an estimate, each in range (at most
/// [`MAX_REMEMBERED_SAMPLES`] packets) whatever numbers it holds.
fn clean(e: LossEstimate) -> (f64, f64, f64) {
    let or = |x: f64, default: f64| if x.is_finite() { x } else { default };
    (
        or(e.samples, 0.0).clamp(0.0, MAX_REMEMBERED_SAMPLES),
        or(e.rate, 0.0).clamp(0.0, 1.0),
        or(e.mean_burst, 1.0).max(1.0),
    )
}

/// An estimate as a NEW_TOKEN token carries it: loss rate in units of 1/65535, mean burst
/// in hundredths of a packet, packets (each 2 bytes, saturating).
pub(crate) fn encode(buf: &mut Vec<u8>, loss: Option<LossEstimate>) {
    let (rate, burst, samples) = match loss {
        Some(l) => {
            let (s, r, b) = clean(l);
            (
                (r * 65535.0).round() as u16,
                (b * 100.0).round().min(65535.0) as u16,
                s.round().min(65535.0) as u16,
            )
        }
        None => (0, 0, 0),
    };
    buf.extend_from_slice(&rate.to_be_bytes());
    buf.extend_from_slice(&burst.to_be_bytes());
    buf.extend_from_slice(&samples.to_be_bytes());
}

/// The estimate [`encode`] wrote (`None`: none, or no packets behind it).
pub(crate) fn decode(r: &mut crate::coding::Reader<'_>) -> Option<Option<LossEstimate>> {
    let rate = r.u16().ok()?;
    let burst = r.u16().ok()?;
    let samples = r.u16().ok()?;
    Some((samples > 0).then(|| LossEstimate {
        rate: f64::from(rate) / 65535.0,
        mean_burst: (f64::from(burst) / 100.0).max(1.0),
        samples: f64::from(samples),
        // A token keeps rate and bursts only: a remembered path is a Gilbert channel.
        isolated: 0.0,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(rate: f64, burst: f64, samples: f64) -> LossEstimate {
        LossEstimate {
            rate,
            mean_burst: burst,
            samples,
            isolated: 0.0,
        }
    }

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));

    #[test]
    fn connections_add_up_newest_weighing_most() {
        let mut m = PathMemory::new(8, Duration::from_secs(3600));
        let t = Instant::ZERO + Duration::from_secs(1);
        assert!(m.get(t, A).is_none());
        m.record(t, A, est(0.10, 2.0, 100.0));
        m.record(t, A, est(0.0, 1.0, 100.0));
        let e = m.get(t, A).unwrap();
        assert!((e.rate - 0.05).abs() < 1e-9, "{e:?}");
        assert!((e.mean_burst - 2.0).abs() < 1e-9, "{e:?}");
        assert!((e.samples - 200.0).abs() < 1e-9);
        // A long clean connection outweighs the history: at most 1000 packets are kept.
        m.record(t, A, est(0.0, 1.0, 950.0));
        let e = m.get(t, A).unwrap();
        assert!((e.samples - 1000.0).abs() < 1e-9);
        assert!((e.rate - 0.05 * 50.0 / 1000.0).abs() < 1e-9, "{e:?}");
        // IPv4-mapped IPv6 is the same peer.
        assert!(m.get(t, "::ffff:10.0.0.1".parse().unwrap()).is_some());
    }

    #[test]
    fn bounded_in_addresses_and_time() {
        let mut m = PathMemory::new(2, Duration::from_secs(10));
        let at = |s| Instant::ZERO + Duration::from_secs(s);
        let ip = |i: u8| IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, i));
        m.record(at(1), ip(1), est(0.1, 1.0, 10.0));
        m.record(at(2), ip(2), est(0.1, 1.0, 10.0));
        m.record(at(3), ip(3), est(0.1, 1.0, 10.0));
        assert_eq!(m.len(), 2);
        assert!(m.get(at(3), ip(1)).is_none(), "the oldest went");
        assert!(m.get(at(12), ip(2)).is_some());
        assert!(m.get(at(13), ip(2)).is_none(), "expired");
        // An expired estimate is not merged into the next one.
        m.record(at(20), ip(2), est(0.0, 1.0, 10.0));
        assert_eq!(m.get(at(20), ip(2)).unwrap().rate, 0.0);
        // Nothing learned, nothing kept; no memory at all with capacity 0.
        m.record(at(20), ip(4), est(0.5, 1.0, 0.0));
        assert!(m.get(at(20), ip(4)).is_none());
        let mut none = PathMemory::new(0, Duration::from_secs(10));
        none.record(at(1), ip(1), est(0.1, 1.0, 10.0));
        assert!(none.is_empty());
    }

    #[test]
    fn hostile_numbers_stay_in_range() {
        let e = merge(
            est(f64::NAN, f64::INFINITY, 1e30),
            est(2.0, 0.0, f64::INFINITY),
        );
        assert!(e.rate.is_finite() && (0.0..=1.0).contains(&e.rate), "{e:?}");
        assert!(e.mean_burst >= 1.0 && e.samples <= MAX_REMEMBERED_SAMPLES);
    }

    #[test]
    fn token_encoding_round_trips() {
        for loss in [None, Some(est(0.06, 1.5, 37.0)), Some(est(1.0, 900.0, 1e9))] {
            let mut buf = Vec::new();
            encode(&mut buf, loss);
            assert_eq!(buf.len(), 6);
            let got = decode(&mut crate::coding::Reader::new(&buf)).unwrap();
            match (loss, got) {
                (None, None) => {}
                (Some(l), Some(g)) => {
                    assert!((l.rate.min(1.0) - g.rate).abs() < 1e-4, "{l:?} {g:?}");
                    assert!((l.mean_burst.min(655.35) - g.mean_burst).abs() < 0.01);
                    assert!((l.samples.min(MAX_REMEMBERED_SAMPLES) - g.samples).abs() < 0.5);
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(decode(&mut crate::coding::Reader::new(&[0; 5])).is_none());
    }
}
