//! qfec-sim: a deterministic discrete-event network simulator in virtual time.
//!
//! It drives any [`Node`] (QUIC endpoints through an adapter, or the small test nodes in
//! [`nodes`]) over link directions built from [`LinkSpec`]s: ingress loss -> drop-tail queue ->
//! serializer (rate, mahimahi trace, piecewise changes, or a station of a shared 802.11n
//! channel, see [`wifi`]) -> air loss -> corruption -> delay/jitter. Events are ordered by (time, insertion sequence) and every random stage has
//! its own seeded generator, so the same seed gives the same run, byte for byte, as witnessed
//! by [`Simulator::event_hash`].
//!
//! ```
//! use std::time::Duration;
//! use qfec_proto::Instant;
//! use qfec_sim::{LinkSpec, Simulator, nodes::{CbrSender, Sink}};
//!
//! let (a, b) = ("10.0.0.1:1".parse().unwrap(), "10.0.0.2:1".parse().unwrap());
//! let mut sim: Simulator = Simulator::new(1);
//! sim.add_node(a, Box::new(CbrSender::new(b, 1200, Duration::from_millis(1), 10)));
//! let sink = sim.add_node(b, Box::new(Sink::default()));
//! let link = LinkSpec::new("a->b", 10_000_000, Duration::from_millis(15));
//! sim.connect(a, b, &link, &link.clone());
//! sim.run_until_done(Instant::from_nanos(1_000_000_000));
//! assert_eq!(sim.link_stats(qfec_sim::LinkId(0)).delivered_packets, 10);
//! # let _ = sink;
//! ```

use std::net::SocketAddr;

pub use qfec_proto::{DatagramInfo, EcnCodepoint, Instant};

pub mod link;
pub mod log;
pub mod loss;
pub mod nodes;
pub mod pcap;
pub mod rng;
mod sim;
mod stage;
pub mod trace;
pub mod wifi;
mod world;

pub use link::{
    EcnMarking, Jitter, LinkChange, LinkSpec, QueueLimit, Serializer, bdp_bytes, serialization_ns,
};
pub use log::{EventKind, EventLog};
pub use loss::{LossModel, LossSpec};
pub use pcap::{PcapMode, PcapWriter};
pub use rng::SimRng;
pub use sim::{LinkId, NodeId, RunOutcome, SimStats, Simulator};
pub use stage::LinkStats;
pub use trace::DeliveryTrace;

/// Anything that exchanges datagrams in virtual time (the sans-IO shape of qfec-proto).
pub trait Node {
    /// A datagram arrived from `from` (the sender's address) at time `now`.
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: &[u8]);
    /// A datagram arrived, with what the network tells of it: its source (`remote`), this
    /// node's address it came to (`local`: a node with several addresses,
    /// [`Simulator::add_address`], e.g. one per path, tells them apart by it) and its IP
    /// header's ECN codepoint (a queue may have marked it CE, [`EcnMarking`]).
    fn handle_datagram_info(&mut self, now: Instant, info: DatagramInfo, data: &[u8]) {
        self.handle_datagram(now, info.remote, data)
    }
    /// Emit the next datagram to send now (destination, bytes), or None. Called repeatedly
    /// until None after every event delivered to this node.
    fn poll_transmit(&mut self, now: Instant) -> Option<(SocketAddr, Vec<u8>)>;
    /// Like [`Node::poll_transmit`], with the node's address to send from and the ECN
    /// codepoint to send with.
    fn poll_outgoing(&mut self, now: Instant) -> Option<Outgoing> {
        self.poll_transmit(now).map(|(to, data)| Outgoing {
            from: None,
            to,
            ecn: None,
            data,
        })
    }
    /// The next time this node wants `handle_timeout`; None = no timer.
    fn poll_timeout(&mut self) -> Option<Instant>;
    fn handle_timeout(&mut self, now: Instant);
    /// True when the node has nothing left to do (the simulation may stop when all are done).
    fn is_done(&self) -> bool {
        false
    }
}

/// A datagram a node sends ([`Node::poll_outgoing`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// The node's address to send from; `None` (or an address that is not the node's): its
    /// first.
    pub from: Option<SocketAddr>,
    pub to: SocketAddr,
    /// The IP header's ECN codepoint; `None`: Not-ECT.
    pub ecn: Option<EcnCodepoint>,
    pub data: Vec<u8>,
}

impl<T: Node + ?Sized> Node for Box<T> {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: &[u8]) {
        (**self).handle_datagram(now, from, data)
    }
    fn handle_datagram_info(&mut self, now: Instant, info: DatagramInfo, data: &[u8]) {
        (**self).handle_datagram_info(now, info, data)
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<(SocketAddr, Vec<u8>)> {
        (**self).poll_transmit(now)
    }
    fn poll_outgoing(&mut self, now: Instant) -> Option<Outgoing> {
        (**self).poll_outgoing(now)
    }
    fn poll_timeout(&mut self) -> Option<Instant> {
        (**self).poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        (**self).handle_timeout(now)
    }
    fn is_done(&self) -> bool {
        (**self).is_done()
    }
}
