//! The discrete-event engine: nodes, routes, link directions and the event loop.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;

use qfec_proto::{DatagramInfo, EcnCodepoint, Instant};

use crate::Node;
use crate::link::{LinkChange, LinkSpec, Serializer};
use crate::log::{EventKind, EventLog, bytes_hash};
use crate::pcap::{PcapMode, PcapWriter};
use crate::stage::{LinkRt, LinkStats};
use crate::wifi::medium::Medium;
use crate::wifi::{WifiChannelStats, WifiStats};
use crate::world::{Ev, Packet, World};

/// Index of a node in a [`Simulator`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u32);

/// Index of a link direction in a [`Simulator`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub u32);

/// Why a run stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// Every node reported `is_done()`.
    AllDone,
    /// No event left to process.
    Idle,
    /// The time limit was reached.
    Limit,
    /// The event budget set by [`Simulator::set_event_limit`] ran out (a node that re-arms
    /// a timer in the past forever would otherwise spin at one instant).
    EventLimit,
}

/// Engine-wide counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Events processed (including stale timers).
    pub events: u64,
    pub timeouts: u64,
    pub datagrams_sent: u64,
    /// Datagrams with no route, or routed to an address no node owns.
    pub unroutable: u64,
}

/// See [`Simulator::add_rebinding`].
struct Rebinding {
    at: u64,
    inside: SocketAddr,
    outside: SocketAddr,
    /// Took effect: the node sent at or after `at`.
    active: bool,
}

struct NodeSlot<N> {
    node: N,
    addr: SocketAddr,
    /// The time the node wants `handle_timeout`.
    timer: Option<u64>,
    /// Time of the heap entry that guards `timer` (always <= `timer` when both are set). A
    /// timer that moves later does not push a new entry: the guard fires early and re-arms,
    /// so nodes that push their timers back on every packet (QUIC) keep the heap small.
    armed: Option<u64>,
}

/// A deterministic network of nodes in virtual time. Generic over the node type so drivers
/// can get their concrete nodes back (`Box<dyn Node>` works too).
pub struct Simulator<N: Node = Box<dyn Node>> {
    seed: u64,
    now: u64,
    started: bool,
    nodes: Vec<NodeSlot<N>>,
    addrs: BTreeMap<SocketAddr, NodeId>,
    routes: BTreeMap<(SocketAddr, SocketAddr), LinkId>,
    /// NAT rebindings, by time.
    nat: Vec<Rebinding>,
    links: Vec<LinkRt>,
    /// WLAN channels, found by name when a station joins.
    media: Vec<Medium>,
    media_by_name: BTreeMap<String, u32>,
    world: World,
    stats: SimStats,
    event_limit: u64,
}

impl<N: Node> Simulator<N> {
    /// An empty network; `seed` seeds every random stage (see [`crate::rng::stage_seed`]).
    pub fn new(seed: u64) -> Self {
        Simulator {
            seed,
            now: 0,
            started: false,
            nodes: Vec::new(),
            addrs: BTreeMap::new(),
            routes: BTreeMap::new(),
            nat: Vec::new(),
            links: Vec::new(),
            media: Vec::new(),
            media_by_name: BTreeMap::new(),
            world: World::default(),
            stats: SimStats::default(),
            event_limit: u64::MAX,
        }
    }

    /// Add a node reachable at `addr` (its datagrams are sent from `addr`).
    pub fn add_node(&mut self, addr: SocketAddr, node: N) -> NodeId {
        let id = NodeId(self.nodes.len() as u32);
        assert!(
            self.addrs.insert(addr, id).is_none(),
            "address {addr} already has a node"
        );
        self.nodes.push(NodeSlot {
            node,
            addr,
            timer: None,
            armed: None,
        });
        if self.started {
            // Joined a running simulation: let it send and arm its timer now.
            self.drive(id.0);
        }
        id
    }

    /// Make `node` also reachable at `addr` (e.g. a second path).
    pub fn add_address(&mut self, node: NodeId, addr: SocketAddr) {
        assert!(
            self.addrs.insert(addr, node).is_none(),
            "address {addr} taken"
        );
    }

    /// A NAT in front of the node address `inside` rebinds it to `outside` from `at`: the
    /// first datagram the node sends from then on leaves from `outside`, and from that moment
    /// datagrams to `outside` reach it (as sent to `inside`, over `inside`'s routes) and those
    /// to its previous outside address are dropped (counted unroutable), as when a NAT whose
    /// mapping expired maps the next outgoing packet anew. Panics if `outside` is a node's
    /// address.
    pub fn add_rebinding(&mut self, at: Instant, inside: SocketAddr, outside: SocketAddr) {
        assert!(
            !self.addrs.contains_key(&outside),
            "rebinding to {outside}, a node's address"
        );
        self.nat.push(Rebinding {
            at: at.as_nanos(),
            inside,
            outside,
            active: false,
        });
        self.nat.sort_by_key(|r| r.at);
    }

    /// The address `inside` appears as (itself before its first rebinding takes effect).
    fn outside(&self, inside: SocketAddr) -> SocketAddr {
        self.nat
            .iter()
            .rev()
            .find(|r| r.active && r.inside == inside)
            .map_or(inside, |r| r.outside)
    }

    /// `src` sends at `now`: the rebindings due for it take effect.
    fn rebind_on_send(&mut self, now: u64, src: SocketAddr) {
        for r in &mut self.nat {
            if r.inside == src && r.at <= now {
                r.active = true;
            }
        }
    }

    /// The node address a datagram to `dst` reaches: `dst` itself unless a NAT rebound it;
    /// None for an outside address no longer (or not yet) in use.
    fn inside(&self, dst: SocketAddr) -> Option<SocketAddr> {
        if self.nat.is_empty() {
            return Some(dst);
        }
        if let Some(r) = self
            .nat
            .iter()
            .find(|r| r.active && r.outside == dst && self.outside(r.inside) == dst)
        {
            return Some(r.inside);
        }
        (self.outside(dst) == dst && !self.nat.iter().any(|r| r.outside == dst)).then_some(dst)
    }

    /// Add a link direction; attach it to routes with [`Simulator::add_route`].
    ///
    /// A [`Serializer::Wifi`] direction becomes a station of the WLAN channel its spec names,
    /// created by the first station that names it. Panics on an invalid station (see
    /// [`crate::wifi::WifiStation::validate`]), on a rate change scheduled for one, or on a
    /// channel name already used with other channel settings.
    pub fn add_link(&mut self, spec: &LinkSpec) -> LinkId {
        let id = self.links.len() as u32;
        let station = match &spec.serializer {
            Serializer::Wifi(st) => Some(self.join_medium(id, spec, st)),
            _ => None,
        };
        let rt = LinkRt::new(id, spec, self.seed, station);
        for (i, (at, _)) in rt.changes.iter().enumerate() {
            self.world.schedule(
                at.as_nanos().max(self.now),
                Ev::Change {
                    link: id,
                    idx: i as u32,
                },
            );
        }
        self.links.push(rt);
        LinkId(id)
    }

    fn join_medium(
        &mut self,
        link: u32,
        spec: &LinkSpec,
        st: &crate::wifi::WifiStation,
    ) -> (u32, u32) {
        if let Err(e) = st.validate() {
            panic!("link {:?}: {e}", spec.name);
        }
        assert!(
            !spec
                .changes
                .iter()
                .any(|(_, c)| matches!(c, LinkChange::Rate(_))),
            "link {:?}: a WLAN station's rate is its PHY rate; it takes no rate changes",
            spec.name
        );
        let next = self.media.len() as u32;
        let m = *self
            .media_by_name
            .entry(st.channel.name.clone())
            .or_insert(next);
        if m == next {
            self.media.push(Medium::new(m, st.channel.clone()));
        }
        let medium = &mut self.media[m as usize];
        if medium.spec != st.channel {
            panic!(
                "link {:?}: {}",
                spec.name,
                crate::wifi::WifiSpecError::ChannelMismatch(st.channel.name.clone())
            );
        }
        (m, medium.add_station(link, st, self.seed, &spec.name))
    }

    /// Datagrams from `src` to `dst` traverse `link` (several routes may share one link).
    pub fn add_route(&mut self, src: SocketAddr, dst: SocketAddr, link: LinkId) {
        self.routes.insert((src, dst), link);
    }

    /// Two directions between `a` and `b`: `ab` carries a->b, `ba` carries b->a.
    pub fn connect(
        &mut self,
        a: SocketAddr,
        b: SocketAddr,
        ab: &LinkSpec,
        ba: &LinkSpec,
    ) -> (LinkId, LinkId) {
        let l1 = self.add_link(ab);
        let l2 = self.add_link(ba);
        self.add_route(a, b, l1);
        self.add_route(b, a, l2);
        (l1, l2)
    }

    /// Capture datagrams into a pcap stream.
    pub fn set_pcap(&mut self, out: Box<dyn Write + Send>, mode: PcapMode) -> std::io::Result<()> {
        self.world.pcap = Some((PcapWriter::new(out)?, mode));
        Ok(())
    }

    /// Flush the pcap and the text log; reports the first capture error, if any.
    pub fn flush(&mut self) -> std::io::Result<()> {
        if let Some(e) = self.world.pcap_error.take() {
            return Err(e);
        }
        if let Some((w, _)) = self.world.pcap.as_mut() {
            w.flush()?;
        }
        self.world.log.flush()
    }

    /// Stop `run_until_done` with [`RunOutcome::EventLimit`] after `n` events in total.
    pub fn set_event_limit(&mut self, n: u64) {
        self.event_limit = n;
    }

    /// Also write a text line per event.
    pub fn set_text_log(&mut self, out: Box<dyn Write + Send>) {
        self.world.log.set_text(out);
    }

    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.now)
    }

    pub fn node(&self, id: NodeId) -> &N {
        &self.nodes[id.0 as usize].node
    }

    /// Mutable access; call [`Simulator::wake`] afterwards if you changed what it wants to send.
    pub fn node_mut(&mut self, id: NodeId) -> &mut N {
        &mut self.nodes[id.0 as usize].node
    }

    pub fn node_addr(&self, id: NodeId) -> SocketAddr {
        self.nodes[id.0 as usize].addr
    }

    pub fn link_stats(&self, id: LinkId) -> &LinkStats {
        &self.links[id.0 as usize].stats
    }

    /// The WLAN counters of a link direction that is a station (None otherwise).
    pub fn wifi_stats(&self, id: LinkId) -> Option<&WifiStats> {
        let (m, s) = self.links[id.0 as usize].medium_station()?;
        Some(self.media[m as usize].station_stats(s))
    }

    /// The counters of the WLAN channel a link direction is a station of.
    pub fn wifi_channel_stats(&self, id: LinkId) -> Option<&WifiChannelStats> {
        let (m, _) = self.links[id.0 as usize].medium_station()?;
        Some(&self.media[m as usize].stats)
    }

    /// Every link direction with its name and counters, in creation order.
    pub fn links(&self) -> impl Iterator<Item = (LinkId, &str, &LinkStats)> {
        self.links
            .iter()
            .enumerate()
            .map(|(i, l)| (LinkId(i as u32), l.name.as_str(), &l.stats))
    }

    pub fn link_name(&self, id: LinkId) -> &str {
        &self.links[id.0 as usize].name
    }

    pub fn stats(&self) -> &SimStats {
        &self.stats
    }

    pub fn event_log(&self) -> &EventLog {
        &self.world.log
    }

    /// Running hash of all events: equal for equal seeds and inputs.
    pub fn event_hash(&self) -> u64 {
        self.world.log.hash()
    }

    /// Poll a node for datagrams and its timer now (after external changes to it).
    pub fn wake(&mut self, id: NodeId) {
        self.drive(id.0);
    }

    fn start(&mut self) {
        if !self.started {
            self.started = true;
            for i in 0..self.nodes.len() {
                self.drive(i as u32);
            }
        }
    }

    /// Drain a node's transmissions and re-arm its timer.
    fn drive(&mut self, idx: u32) {
        let now = self.now;
        let t = Instant::from_nanos(now);
        loop {
            let slot = &mut self.nodes[idx as usize];
            let Some(out) = slot.node.poll_outgoing(t) else {
                break;
            };
            // The node's own address it names, else its first.
            let src = out
                .from
                .filter(|a| self.addrs.get(a) == Some(&NodeId(idx)))
                .unwrap_or(slot.addr);
            self.send(now, src, out.to, out.ecn, out.data);
        }
        let slot = &mut self.nodes[idx as usize];
        let timer = slot.node.poll_timeout().map(|t| t.as_nanos().max(now));
        slot.timer = timer;
        if let Some(at) = timer
            && slot.armed.is_none_or(|a| a > at)
        {
            slot.armed = Some(at);
            self.world.schedule(at, Ev::Timer(idx));
        }
    }

    fn send(
        &mut self,
        now: u64,
        src: SocketAddr,
        dst: SocketAddr,
        ecn: Option<EcnCodepoint>,
        data: Vec<u8>,
    ) {
        self.stats.datagrams_sent += 1;
        let hash = bytes_hash(&data);
        // Behind a NAT: routed as the node's own addresses, on the wire as the outside ones.
        let (route_src, route_dst) = (src, self.inside(dst).unwrap_or(dst));
        let src = if self.nat.is_empty() {
            src
        } else {
            self.rebind_on_send(now, src);
            self.outside(src)
        };
        self.world.capture(now, true, src, dst, ecn, &data);
        let Some(&link) = self.routes.get(&(route_src, route_dst)) else {
            self.stats.unroutable += 1;
            self.world
                .log
                .record(now, EventKind::DropNoRoute, u32::MAX, data.len(), hash);
            return;
        };
        let slot = self.world.insert(Packet {
            src,
            dst,
            data,
            ecn,
            hash,
            link: link.0,
        });
        self.links[link.0 as usize].offer(now, slot, &mut self.world);
        self.wake_medium(link.0);
    }

    /// A station's queue may have a frame for its medium now.
    fn wake_medium(&mut self, link: u32) {
        if let Some((m, s)) = self.links[link as usize].medium_station() {
            self.media[m as usize].backlog(self.now, s, &self.links, &mut self.world);
        }
    }

    /// Time of the next event, if any.
    pub fn next_event_time(&self) -> Option<Instant> {
        self.world.peek_time().map(Instant::from_nanos)
    }

    /// Process one event. Returns false when there is none.
    pub fn step(&mut self) -> bool {
        self.start();
        let Some((t, ev)) = self.world.pop() else {
            return false;
        };
        debug_assert!(t >= self.now, "time never goes back");
        self.now = t;
        self.stats.events += 1;
        match ev {
            Ev::Arrive(slot) => self.arrive(t, slot),
            Ev::ServiceDone(l) => self.links[l as usize].service_done(t, &mut self.world),
            Ev::Opportunity(l) => self.links[l as usize].opportunity(t, &mut self.world),
            Ev::Change { link, idx } => {
                self.links[link as usize].apply_change(t, idx as usize, &mut self.world);
                self.wake_medium(link);
            }
            Ev::WifiAccess {
                channel,
                generation,
            } => {
                self.media[channel as usize].access(t, generation, &mut self.links, &mut self.world)
            }
            Ev::WifiTxEnd(channel) => {
                self.media[channel as usize].tx_end(t, &mut self.links, &mut self.world)
            }
            Ev::Timer(node) => {
                let slot = &mut self.nodes[node as usize];
                if slot.armed != Some(t) {
                    // A superseded guard (the timer moved earlier and fired already).
                    return true;
                }
                slot.armed = None;
                match slot.timer {
                    Some(at) if at == t => {
                        slot.timer = None;
                        self.stats.timeouts += 1;
                        self.world.log.record(t, EventKind::Timeout, node, 0, 0);
                        slot.node.handle_timeout(Instant::from_nanos(t));
                        self.drive(node);
                    }
                    Some(later) => {
                        // The timer moved later since this guard was set: re-arm.
                        slot.armed = Some(later);
                        self.world.schedule(later, Ev::Timer(node));
                    }
                    None => {}
                }
            }
        }
        true
    }

    fn arrive(&mut self, now: u64, slot: u32) {
        let mut p = self.world.take(slot);
        let inside = self.inside(p.dst);
        let Some(&NodeId(dst)) = inside.and_then(|a| self.addrs.get(&a)) else {
            self.stats.unroutable += 1;
            self.world
                .log
                .record(now, EventKind::DropNoRoute, p.link, p.data.len(), p.hash);
            return;
        };
        self.links[p.link as usize].delivered(p.data.len());
        self.world
            .log
            .record(now, EventKind::Deliver, p.link, p.data.len(), p.hash);
        self.world.capture(now, false, p.src, p.dst, p.ecn, &p.data);
        p.dst = inside.unwrap_or(p.dst);
        let info = DatagramInfo {
            remote: p.src,
            local: Some(p.dst),
            ecn: p.ecn,
        };
        self.nodes[dst as usize]
            .node
            .handle_datagram_info(Instant::from_nanos(now), info, &p.data);
        self.drive(dst);
    }

    /// Process every event up to and including `deadline`; the clock ends at `deadline`.
    pub fn run_until(&mut self, deadline: Instant) {
        self.start();
        let d = deadline.as_nanos();
        while self.world.peek_time().is_some_and(|t| t <= d) {
            self.step();
        }
        self.now = self.now.max(d);
    }

    /// Run until all nodes are done, nothing is left to do, or `limit` is reached.
    pub fn run_until_done(&mut self, limit: Instant) -> RunOutcome {
        self.start();
        loop {
            if self.all_done() {
                return RunOutcome::AllDone;
            }
            if self.stats.events >= self.event_limit {
                return RunOutcome::EventLimit;
            }
            match self.world.peek_time() {
                None => return RunOutcome::Idle,
                Some(t) if t > limit.as_nanos() => {
                    self.now = self.now.max(limit.as_nanos());
                    return RunOutcome::Limit;
                }
                Some(_) => {
                    self.step();
                }
            }
        }
    }

    fn all_done(&self) -> bool {
        self.nodes.iter().all(|n| n.node.is_done())
    }
}
