//! An IEEE 802.11n WLAN: PHY timing and the settings of a channel and its stations.

mod phy;
mod spec;

pub use phy::{Band, ChannelWidth, HtRate, LegacyRate};
pub use spec::{
    ACK_BYTES, Access, Aggregation, BLOCK_ACK_BYTES, DELIMITER_BYTES, IP_UDP_BYTES,
    LLC_SNAP_BYTES, MAC_OVERHEAD_BYTES, MAX_AMPDU_BYTES, MAX_AMPDU_MPDUS, MAX_HT_PPDU,
    WifiChannel, WifiSpecError, WifiStation, mpdu_bytes, subframe_bytes,
};
