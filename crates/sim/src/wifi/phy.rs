//! 802.11n (HT) and legacy OFDM PHY timing, written from the standard's definitions
//! (IEEE 802.11-2012 clause 20 for HT-mixed PPDUs, clause 18 for the OFDM control frames).

use std::fmt;

/// Frequency band: it sets SIFS, the slot time and the OFDM signal extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Band {
    /// 5 GHz: SIFS 16 us, slot 9 us, no signal extension.
    #[default]
    Ghz5,
    /// 2.4 GHz in an HT-only BSS: SIFS 10 us, short slot 9 us, and the 6 us signal extension
    /// after every OFDM PPDU (802.11-2012 19.3.2.3 and 20.4.3).
    Ghz2_4,
}

impl Band {
    pub const fn slot_ns(self) -> u64 {
        9_000
    }

    pub const fn sifs_ns(self) -> u64 {
        match self {
            Band::Ghz5 => 16_000,
            Band::Ghz2_4 => 10_000,
        }
    }

    /// Idle time appended to every OFDM PPDU at 2.4 GHz.
    pub const fn signal_extension_ns(self) -> u64 {
        match self {
            Band::Ghz5 => 0,
            Band::Ghz2_4 => 6_000,
        }
    }

    /// DIFS = SIFS + 2 slots (AIFS with AIFSN 2).
    pub const fn difs_ns(self) -> u64 {
        self.sifs_ns() + 2 * self.slot_ns()
    }
}

impl fmt::Display for Band {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Band::Ghz5 => "5ghz",
            Band::Ghz2_4 => "2.4ghz",
        })
    }
}

/// HT channel width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChannelWidth {
    #[default]
    Mhz20,
    Mhz40,
}

impl ChannelWidth {
    /// From a width in MHz (20 or 40).
    pub fn from_mhz(mhz: u32) -> Option<Self> {
        match mhz {
            20 => Some(ChannelWidth::Mhz20),
            40 => Some(ChannelWidth::Mhz40),
            _ => None,
        }
    }

    pub fn mhz(self) -> u32 {
        match self {
            ChannelWidth::Mhz20 => 20,
            ChannelWidth::Mhz40 => 40,
        }
    }

    /// Data subcarriers of an HT PPDU (N_SD).
    fn data_subcarriers(self) -> u32 {
        match self {
            ChannelWidth::Mhz20 => 52,
            ChannelWidth::Mhz40 => 108,
        }
    }
}

/// Coded bits per subcarrier per stream (N_BPSCS) of MCS 0-7 (and of each stream of 8-31):
/// BPSK, QPSK, QPSK, 16-QAM, 16-QAM, 64-QAM x 3.
const BITS_PER_SUBCARRIER: [u32; 8] = [1, 2, 2, 4, 4, 6, 6, 6];
/// Coding rate R of MCS 0-7 as (numerator, denominator).
const CODING_RATE: [(u32, u32); 8] = [
    (1, 2),
    (1, 2),
    (3, 4),
    (1, 2),
    (3, 4),
    (2, 3),
    (3, 4),
    (5, 6),
];

/// HT-mixed preamble before the HT-LTFs: L-STF 8 + L-LTF 8 + L-SIG 4 + HT-SIG 8 + HT-STF 4 us.
const HT_PREAMBLE_BASE_NS: u64 = 32_000;
const HT_LTF_NS: u64 = 4_000;
const SYMBOL_LONG_GI_NS: u64 = 4_000;
const SYMBOL_SHORT_GI_NS: u64 = 3_600;
/// SERVICE field bits before the PSDU and tail bits per BCC encoder after it.
const SERVICE_BITS: u64 = 16;
const TAIL_BITS: u64 = 6;

/// An 802.11n data rate: MCS 0-31 (equal modulation, 1-4 spatial streams), width, guard
/// interval. No STBC, BCC coding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HtRate {
    mcs: u8,
    width: ChannelWidth,
    short_gi: bool,
}

impl HtRate {
    /// MCS 0-31; an error otherwise.
    pub fn new(mcs: u8, width: ChannelWidth, short_gi: bool) -> Result<Self, super::WifiSpecError> {
        if mcs > 31 {
            return Err(super::WifiSpecError::Mcs(mcs));
        }
        Ok(HtRate {
            mcs,
            width,
            short_gi,
        })
    }

    pub fn mcs(&self) -> u8 {
        self.mcs
    }

    pub fn width(&self) -> ChannelWidth {
        self.width
    }

    pub fn short_gi(&self) -> bool {
        self.short_gi
    }

    /// Spatial streams (N_SS): MCS 0-7 one, 8-15 two, ...
    pub fn streams(&self) -> u32 {
        u32::from(self.mcs / 8) + 1
    }

    /// Data bits per OFDM symbol (N_DBPS = N_SD x N_BPSCS x R x N_SS).
    pub fn bits_per_symbol(&self) -> u64 {
        let i = usize::from(self.mcs % 8);
        let (num, den) = CODING_RATE[i];
        let coded = self.width.data_subcarriers() * BITS_PER_SUBCARRIER[i] * self.streams();
        u64::from(coded * num / den)
    }

    fn symbol_ns(&self) -> u64 {
        if self.short_gi {
            SYMBOL_SHORT_GI_NS
        } else {
            SYMBOL_LONG_GI_NS
        }
    }

    /// PHY data rate in bits per second (MCS 7, 20 MHz, long GI: 65 Mb/s).
    pub fn rate_bps(&self) -> f64 {
        self.bits_per_symbol() as f64 * 1e9 / self.symbol_ns() as f64
    }

    /// BCC encoders (N_ES): the standard's tables use a second encoder above 300 Mb/s.
    fn encoders(&self) -> u64 {
        let short_gi_rate = self.bits_per_symbol() as f64 * 1e9 / SYMBOL_SHORT_GI_NS as f64;
        if short_gi_rate > 300e6 { 2 } else { 1 }
    }

    /// HT-LTFs for the streams (N_LTF: 1, 2, 4, 4).
    fn ht_ltfs(&self) -> u64 {
        match self.streams() {
            1 => 1,
            2 => 2,
            _ => 4,
        }
    }

    /// HT-mixed preamble and headers: 36 us with one stream, 4 us more per extra HT-LTF.
    pub fn preamble_ns(&self) -> u64 {
        HT_PREAMBLE_BASE_NS + HT_LTF_NS * self.ht_ltfs()
    }

    /// Air time of an HT-mixed PPDU carrying a PSDU of `psdu_bytes` (20.4.3: with a short GI
    /// the symbols are rounded up to a whole number of 4 us), signal extension included.
    pub fn ppdu_ns(&self, psdu_bytes: usize, band: Band) -> u64 {
        let bits = SERVICE_BITS + 8 * psdu_bytes as u64 + TAIL_BITS * self.encoders();
        let symbols = bits.div_ceil(self.bits_per_symbol());
        let data = if self.short_gi {
            SYMBOL_LONG_GI_NS * (SYMBOL_SHORT_GI_NS * symbols).div_ceil(SYMBOL_LONG_GI_NS)
        } else {
            SYMBOL_LONG_GI_NS * symbols
        };
        self.preamble_ns() + data + band.signal_extension_ns()
    }
}

impl fmt::Display for HtRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MCS {} {} MHz {} GI ({:.1} Mb/s)",
            self.mcs,
            self.width.mhz(),
            if self.short_gi { "short" } else { "long" },
            self.rate_bps() / 1e6
        )
    }
}

/// A legacy OFDM rate for control responses (ACK, Block ACK): 6, 9, 12, 18, 24, 36, 48 or
/// 54 Mb/s, 20 MHz.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LegacyRate {
    mbps: u32,
}

impl LegacyRate {
    pub fn new(mbps: u32) -> Result<Self, super::WifiSpecError> {
        match mbps {
            6 | 9 | 12 | 18 | 24 | 36 | 48 | 54 => Ok(LegacyRate { mbps }),
            _ => Err(super::WifiSpecError::ControlRate(mbps)),
        }
    }

    /// 24 Mb/s: the highest mandatory rate, what control responses to HT data use.
    pub const fn basic() -> Self {
        LegacyRate { mbps: 24 }
    }

    pub fn mbps(&self) -> u32 {
        self.mbps
    }

    /// Air time of a legacy OFDM PPDU of `bytes`: 20 us preamble and SIGNAL, then 4 us
    /// symbols of 4 x rate bits (clause 18.4.3), signal extension included.
    pub fn ppdu_ns(&self, bytes: usize, band: Band) -> u64 {
        let bits = SERVICE_BITS + 8 * bytes as u64 + TAIL_BITS;
        let symbols = bits.div_ceil(u64::from(self.mbps) * 4);
        20_000 + SYMBOL_LONG_GI_NS * symbols + band.signal_extension_ns()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(mcs: u8, mhz: u32, sgi: bool) -> f64 {
        HtRate::new(mcs, ChannelWidth::from_mhz(mhz).unwrap(), sgi)
            .unwrap()
            .rate_bps()
            / 1e6
    }

    #[test]
    fn ht_rates_match_the_standard_tables() {
        // 802.11-2012 Tables 20-30 to 20-37 (selection).
        let cases = [
            (0, 20, false, 6.5),
            (7, 20, false, 65.0),
            (7, 20, true, 72.2),
            (7, 40, false, 135.0),
            (7, 40, true, 150.0),
            (15, 20, false, 130.0),
            (15, 40, true, 300.0),
            (12, 20, false, 78.0),
            (21, 40, false, 324.0),
            (31, 40, true, 600.0),
            (31, 20, false, 260.0),
        ];
        for (mcs, mhz, sgi, want) in cases {
            let got = rate(mcs, mhz, sgi);
            assert!(
                (got - want).abs() < 0.05,
                "MCS {mcs} {mhz} {sgi}: {got} != {want}"
            );
        }
        assert!(HtRate::new(32, ChannelWidth::Mhz40, false).is_err());
    }

    #[test]
    fn ppdu_durations() {
        let r = HtRate::new(7, ChannelWidth::Mhz20, false).unwrap();
        assert_eq!(r.preamble_ns(), 36_000);
        // 1570 bytes: (16 + 12560 + 6) / 260 = 48.4 -> 49 symbols.
        assert_eq!(r.ppdu_ns(1570, Band::Ghz5), 36_000 + 49 * 4_000);
        assert_eq!(r.ppdu_ns(1570, Band::Ghz2_4), 36_000 + 49 * 4_000 + 6_000);
        // Two streams: two HT-LTFs. Short GI: 49 symbols of 3.6 us = 176.4 -> 180 us.
        let r = HtRate::new(15, ChannelWidth::Mhz20, true).unwrap();
        assert_eq!(r.preamble_ns(), 40_000);
        let s = HtRate::new(7, ChannelWidth::Mhz20, true).unwrap();
        assert_eq!(s.ppdu_ns(1570, Band::Ghz5), 36_000 + 180_000);
        // Four streams: four HT-LTFs.
        let r = HtRate::new(24, ChannelWidth::Mhz20, false).unwrap();
        assert_eq!(r.preamble_ns(), 48_000);
    }

    #[test]
    fn control_frames() {
        let b = LegacyRate::basic();
        // ACK 14 B: 134 bits / 96 -> 2 symbols; compressed Block ACK 32 B: 278 / 96 -> 3.
        assert_eq!(b.ppdu_ns(14, Band::Ghz5), 28_000);
        assert_eq!(b.ppdu_ns(32, Band::Ghz5), 32_000);
        assert_eq!(LegacyRate::new(6).unwrap().ppdu_ns(14, Band::Ghz5), 44_000);
        assert!(LegacyRate::new(25).is_err());
        assert_eq!(Band::Ghz5.difs_ns(), 34_000);
        assert_eq!(Band::Ghz2_4.difs_ns(), 28_000);
    }
}
