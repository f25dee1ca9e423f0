//! An IEEE 802.11n WLAN: one half-duplex channel shared by several stations.
//!
//! A station is the serializer of a link direction ([`crate::Serializer::Wifi`]): a WLAN hop
//! is two directions on one channel, the access point's downlink queue and the client's
//! uplink queue, so every transport ACK the client sends is a channel access that takes air
//! time from the download. Stations join a channel by its name ([`WifiChannel::name`]).
//!
//! A packet's way: the direction's ingress loss and drop-tail queue (the MAC queue) as on any
//! link; then the medium. A station with a frame contends (DCF/EDCA: AIFS, binary exponential
//! backoff frozen while the medium is busy, collisions when two backoffs end in the same slot);
//! the winner sends everything queued at that moment up to the A-MPDU limits (64 MPDUs,
//! 65,535 bytes, 5.484 ms) in one HT PPDU, each MPDU sized with its MAC header and FCS, the
//! LLC/SNAP header and the IPv4 + UDP headers that the simulator's UDP payloads leave out
//! ([`spec::mpdu_bytes`]); the receiver answers after SIFS with a Block ACK (an ACK without
//! aggregation). MPDUs the error model destroys stay in the sender's window and go again
//! first in its next A-MPDU, each with its own retry count, until the retry limit discards
//! them; MPDUs received behind a missing one wait for it (the receiver's reordering buffer),
//! so packets leave the medium in order. At the end of its PPDU an MPDU goes on through the
//! direction's air loss, corruption and delay stages (the wired part of the path).
//!
//! Two events per exchange (channel access, end of the PPDU), none per idle slot: backoff
//! completion times are computed from the counters (see `medium.rs`).
//!
//! Not modelled: RTS/CTS, EIFS (every station resumes after the response timeout), rate
//! adaptation, A-MSDU, TXOP bursts, propagation delay, capture, hidden stations.

pub mod analytic;
pub(crate) mod medium;
mod phy;
mod spec;

pub use medium::{WifiChannelStats, WifiStats};
pub use phy::{Band, ChannelWidth, HtRate, LegacyRate};
pub use spec::{
    ACK_BYTES, Access, Aggregation, BLOCK_ACK_BYTES, DELIMITER_BYTES, IP_UDP_BYTES, LLC_SNAP_BYTES,
    MAC_OVERHEAD_BYTES, MAX_AMPDU_BYTES, MAX_AMPDU_MPDUS, MAX_HT_PPDU, WifiChannel, WifiSpecError,
    WifiStation, mpdu_bytes, subframe_bytes,
};
