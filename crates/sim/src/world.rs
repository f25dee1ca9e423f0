//! Shared engine state: the event queue, the packet slab and the event log.
//!
//! Packets live in a slab and events carry slot indices, so heap entries stay small and a
//! packet's bytes are never copied between stages.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;

use crate::log::EventLog;
use crate::pcap::{PcapMode, PcapWriter};

/// A datagram in flight.
pub(crate) struct Packet {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub data: Vec<u8>,
    /// The IP header's ECN codepoint (a queue may mark it CE on the way).
    pub ecn: Option<qfec_proto::EcnCodepoint>,
    /// Hash of `data` (kept current after corruption) for the event log.
    pub hash: u64,
    pub link: u32,
}

/// Scheduled work. Ties in time are broken by insertion order (the sequence number), never by
/// this enum, so runs are deterministic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Ev {
    /// A packet reaches its destination node.
    Arrive(u32),
    /// The serializer of a rate link finished its packet.
    ServiceDone(u32),
    /// A trace link's delivery opportunity.
    Opportunity(u32),
    /// A node's timer guard (see `NodeSlot::armed`).
    Timer(u32),
    /// Apply change `idx` of a link's schedule.
    Change { link: u32, idx: u32 },
    /// A WLAN channel's planned access (stale unless `generation` is the channel's latest).
    WifiAccess { channel: u32, generation: u32 },
    /// The PPDUs on a WLAN channel end.
    WifiTxEnd(u32),
}

#[derive(Default)]
pub(crate) struct World {
    heap: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    seq: u64,
    packets: Vec<Option<Packet>>,
    free: Vec<u32>,
    pub log: EventLog,
    pub pcap: Option<(PcapWriter<Box<dyn std::io::Write + Send>>, PcapMode)>,
    pub pcap_error: Option<std::io::Error>,
}

impl World {
    #[inline]
    pub fn schedule(&mut self, time_ns: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((time_ns, self.seq, ev)));
    }

    pub fn peek_time(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse((t, _, _))| *t)
    }

    pub fn pop(&mut self) -> Option<(u64, Ev)> {
        self.heap.pop().map(|Reverse((t, _, ev))| (t, ev))
    }

    pub fn insert(&mut self, p: Packet) -> u32 {
        match self.free.pop() {
            Some(slot) => {
                self.packets[slot as usize] = Some(p);
                slot
            }
            None => {
                self.packets.push(Some(p));
                (self.packets.len() - 1) as u32
            }
        }
    }

    pub fn get_mut(&mut self, slot: u32) -> &mut Packet {
        self.packets[slot as usize]
            .as_mut()
            .expect("event refers to a live packet")
    }

    pub fn take(&mut self, slot: u32) -> Packet {
        self.free.push(slot);
        self.packets[slot as usize]
            .take()
            .expect("event refers to a live packet")
    }

    /// Capture a datagram if pcap is on for this direction of observation.
    pub fn capture(
        &mut self,
        time_ns: u64,
        sent: bool,
        src: SocketAddr,
        dst: SocketAddr,
        ecn: Option<qfec_proto::EcnCodepoint>,
        data: &[u8],
    ) {
        if let Some((w, mode)) = self.pcap.as_mut() {
            let wanted = match mode {
                PcapMode::Both => true,
                PcapMode::Sent => sent,
                PcapMode::Delivered => !sent,
            };
            if wanted
                && let Err(e) = w.write_udp(time_ns, src, dst, ecn, data)
                && self.pcap_error.is_none()
            {
                self.pcap_error = Some(e);
            }
        }
    }
}
