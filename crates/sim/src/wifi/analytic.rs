//! Reference models of the medium, for validating it and for sizing experiments.
//!
//! - [`bianchi`]: G. Bianchi, "Performance analysis of the IEEE 802.11 distributed
//!   coordination function", IEEE JSAC 18(3), 2000: saturation throughput of `n` stations
//!   that always have a frame, from the fixed point of the transmission probability `tau`
//!   and the conditional collision probability `p`.
//! - [`ampdu_efficiency`]: the frame-time formula of one saturated station sending A-MPDUs
//!   of `N` MPDUs without errors or contention.
//!
//! Both take their frame durations from the same PHY definitions as the medium
//! ([`WifiStation::ppdu_ns`], [`WifiStation::response_ns`]), so what they check against the
//! simulation is the MAC: contention, backoff and aggregation.

use super::spec::{WifiStation, mpdu_bytes, subframe_bytes};

/// Bianchi's saturation model solved for one setting.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bianchi {
    /// Probability that a station transmits in a (virtual) slot.
    pub tau: f64,
    /// Probability that a transmission collides.
    pub p: f64,
    /// Saturation throughput of all stations together, payload bits per second.
    pub throughput_bps: f64,
}

/// Transmission probability for collision probability `p` (Bianchi's eq. 7) with
/// `W = CWmin + 1` and `m` doublings: `tau = 2 / (1 + W + p W sum_{k<m} (2p)^k)`, the form
/// without the removable singularity at p = 1/2.
pub fn bianchi_tau(p: f64, w: f64, m: u32) -> f64 {
    let sum: f64 = (0..m).map(|k| (2.0 * p).powi(k as i32)).sum();
    2.0 / (1.0 + w + p * w * sum)
}

/// Solves Bianchi's model for `n` saturated stations (`n >= 1`).
///
/// `w = CWmin + 1`, `m = log2((CWmax + 1) / (CWmin + 1))`; `slot_s`, `ts_s`, `tc_s` are the
/// empty slot, the busy time of a successful exchange and of a collision (each including the
/// DIFS that follows it), in seconds; `payload_bits` the payload of one frame.
/// `S = Ps Ptr E[P] / ((1 - Ptr) sigma + Ptr Ps Ts + Ptr (1 - Ps) Tc)`.
pub fn bianchi(
    n: u32,
    w: f64,
    m: u32,
    slot_s: f64,
    ts_s: f64,
    tc_s: f64,
    payload_bits: f64,
) -> Bianchi {
    let n = n.max(1);
    // p - (1 - (1 - tau(p))^(n-1)) rises from < 0 at p = 0 to > 0 at p = 1: bisection.
    let gap = |p: f64| p - (1.0 - (1.0 - bianchi_tau(p, w, m)).powi(n as i32 - 1));
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if gap(mid) > 0.0 {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    // Alone, a station never collides.
    let p = if n == 1 { 0.0 } else { 0.5 * (lo + hi) };
    let tau = bianchi_tau(p, w, m);
    let ptr = 1.0 - (1.0 - tau).powi(n as i32);
    let ps = n as f64 * tau * (1.0 - tau).powi(n as i32 - 1) / ptr;
    let slot_mean = (1.0 - ptr) * slot_s + ptr * ps * ts_s + ptr * (1.0 - ps) * tc_s;
    Bianchi {
        tau,
        p,
        throughput_bps: ps * ptr * payload_bits / slot_mean,
    }
}

/// Ts and Tc (seconds) of basic access without aggregation for a UDP payload of
/// `udp_payload` bytes, as the medium times them: a success is PPDU + SIFS + ACK + AIFS, a
/// collision PPDU + response timeout + AIFS.
pub fn basic_access_times(station: &WifiStation, udp_payload: usize) -> (f64, f64) {
    let ppdu = station.ppdu_ns(mpdu_bytes(udp_payload));
    let sifs = station.channel.band.sifs_ns();
    let aifs = station.aifs_ns();
    let ts = ppdu + sifs + station.response_ns() + aifs;
    let tc = ppdu + station.response_timeout_ns() + aifs;
    (ts as f64 * 1e-9, tc as f64 * 1e-9)
}

/// Bianchi's model for `n` stations configured like `station` sending `udp_payload`-byte
/// frames with basic access (throughput in UDP payload bits per second).
pub fn bianchi_basic_access(station: &WifiStation, n: u32, udp_payload: usize) -> Bianchi {
    let a = station.access;
    let w = f64::from(a.cw_min) + 1.0;
    let m = ((f64::from(a.cw_max) + 1.0) / w).log2().round() as u32;
    let (ts, tc) = basic_access_times(station, udp_payload);
    let slot = station.channel.band.slot_ns() as f64 * 1e-9;
    bianchi(n, w, m, slot, ts, tc, udp_payload as f64 * 8.0)
}

/// MAC efficiency of one saturated station without errors sending A-MPDUs of `n` MPDUs of
/// `udp_payload` bytes: payload air time over the time of a whole cycle,
/// `N L 8 / R / (AIFS + CWmin/2 slot + preamble + N subframe 8 / R + SIFS + Block ACK)`,
/// with subframes of delimiter + MPDU + padding. Throughput = efficiency x R.
pub fn ampdu_efficiency(station: &WifiStation, udp_payload: usize, n: u32) -> f64 {
    let band = station.channel.band;
    let rate = station.phy.rate_bps();
    let n = f64::from(n);
    let payload_s = n * udp_payload as f64 * 8.0 / rate;
    let data_s = n * subframe_bytes(udp_payload) as f64 * 8.0 / rate;
    let ns = |x: u64| x as f64 * 1e-9;
    let backoff = f64::from(station.access.cw_min) / 2.0 * ns(band.slot_ns());
    let cycle = ns(station.aifs_ns())
        + backoff
        + ns(station.phy.preamble_ns() + band.signal_extension_ns())
        + data_s
        + ns(band.sifs_ns())
        + ns(station.response_ns());
    payload_s / cycle
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_station_never_collides() {
        let b = bianchi(1, 16.0, 6, 9e-6, 300e-6, 280e-6, 12_000.0);
        assert_eq!(b.p, 0.0);
        assert!((b.tau - 2.0 / 17.0).abs() < 1e-12);
        // One frame per Ts plus 7.5 empty slots on average.
        let want = 12_000.0 / (300e-6 + 7.5 * 9e-6);
        assert!((b.throughput_bps - want).abs() / want < 1e-9);
    }

    #[test]
    fn more_stations_collide_more() {
        let p: Vec<f64> = [2, 5, 10, 50]
            .iter()
            .map(|&n| bianchi(n, 32.0, 5, 20e-6, 8.98e-3, 8.71e-3, 8184.0).p)
            .collect();
        assert!(p.windows(2).all(|w| w[0] < w[1]), "{p:?}");
        // Bianchi's Fig. 6 region (W = 32, m = 5): p is near 0.2 for 10 stations.
        assert!((0.15..0.3).contains(&p[2]), "{p:?}");
    }
}
