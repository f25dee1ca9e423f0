//! The extension seam without FEC: a test extension that sees the protected bytes of each
//! packet, plays the peer's FEC decoder for a lost packet, and reports the recovery late,
//! after loss detection declared the packet lost (from the loss hook, whose actions run once
//! the datagram is processed) but before its retransmission went out.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use qfec_proto::{
    ConnectionExtension, ExtensionCx, ExtensionFactory, PacketId, ProtectedRegion,
    RecoveredLossMode, SentPacketInfo, Side, TransportConfig,
};
use qfec_testkit::{Datagram, Exchange, LinkSpec, Pair, payload};
use sha2::{Digest, Sha256};

/// What the test and the extension share.
#[derive(Default)]
struct Shared {
    /// Protected frames of packets declared lost, for the test to hand to the receiver.
    lost: Vec<Bytes>,
}

#[derive(Debug)]
struct OracleFactory {
    shared: Arc<Mutex<Shared>>,
    /// Report recoveries of lost packets, in this mode.
    report: Option<RecoveredLossMode>,
    /// Instead of each loss, report only the first one, once this many were declared.
    first_after: Option<usize>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} lost", self.lost.len())
    }
}

impl ExtensionFactory for OracleFactory {
    fn build(&self, _side: Side) -> Box<dyn ConnectionExtension> {
        Box::new(Oracle {
            shared: self.shared.clone(),
            report: self.report,
            first_after: self.first_after,
            lost: Vec::new(),
            copies: BTreeMap::new(),
        })
    }
}

struct Oracle {
    shared: Arc<Mutex<Shared>>,
    report: Option<RecoveredLossMode>,
    first_after: Option<usize>,
    lost: Vec<PacketId>,
    copies: BTreeMap<PacketId, Vec<u8>>,
}

impl ConnectionExtension for Oracle {
    fn name(&self) -> &'static str {
        "oracle"
    }
    fn begin_protected(
        &mut self,
        _cx: &mut ExtensionCx<'_>,
        room: usize,
    ) -> Option<ProtectedRegion> {
        Some(ProtectedRegion {
            header_len: 0,
            max_len: room,
        })
    }
    fn on_packet_sent(&mut self, _cx: &mut ExtensionCx<'_>, p: &SentPacketInfo<'_>) {
        if let Some(b) = p.protected {
            self.copies.insert(p.packet, b.to_vec());
        }
    }
    fn on_packets_acked(&mut self, cx: &mut ExtensionCx<'_>, pns: &[PacketId]) {
        // The PTO and loss estimate read alone are those of the path's whole state.
        assert_eq!(cx.pto(), cx.path().pto);
        assert_eq!(cx.path_loss(), cx.path().loss);
        for pn in pns {
            self.copies.remove(pn);
        }
    }
    fn on_packets_lost(&mut self, cx: &mut ExtensionCx<'_>, pns: &[PacketId]) {
        for &pn in pns {
            if let Some(b) = self.copies.remove(&pn) {
                self.shared.lock().unwrap().lost.push(b.into());
                self.lost.push(pn);
                match (self.report, self.first_after) {
                    (Some(mode), None) => cx.peer_recovered(pn, mode),
                    (Some(mode), Some(n)) if self.lost.len() == n => {
                        cx.peer_recovered(self.lost[0], mode)
                    }
                    _ => {}
                }
            }
        }
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A download with one data packet dropped, whose content the client gets from the oracle;
/// returns the server's counters and its congestion window just before and just after the
/// datagram that made it declare the loss.
fn download(
    report: Option<RecoveredLossMode>,
) -> (qfec_proto::ConnectionStats, Option<(u64, u64)>) {
    let (stats, windows) = download_dropping(report, None, &[50]);
    (stats, windows.first().copied())
}

/// Like `download`, dropping the `drops`-th full-size datagrams of the server; returns the
/// window around each datagram that made the server declare losses.
fn download_dropping(
    report: Option<RecoveredLossMode>,
    first_after: Option<usize>,
    drops: &[u32],
) -> (qfec_proto::ConnectionStats, Vec<(u64, u64)>) {
    let shared = Arc::new(Mutex::new(Shared::default()));
    let mut server = TransportConfig::default();
    server.extensions.push(Arc::new(OracleFactory {
        shared: shared.clone(),
        report,
        first_after,
    }));
    let link = LinkSpec {
        delay: Duration::from_millis(20),
        ..LinkSpec::default()
    };
    let mut pair = Pair::new(3, server, link.clone(), link);
    let ch = pair.connect(TransportConfig::default());
    let mut big = 0;
    let drops = drops.to_vec();
    pair.drop_hook = Some(Box::new(move |d: &Datagram<'_>| {
        if !d.to_server && d.is_short() && d.data.len() > 1300 {
            big += 1;
            return drops.contains(&big);
        }
        false
    }));
    let data = payload(400_000, 3);
    let mut x = Exchange::new(ch, b"get".to_vec(), data.clone());
    let (mut cwnd, mut around_loss) = (0, Vec::new());
    let ok = pair.run_until(Duration::from_secs(20), |p| {
        let lost = std::mem::take(&mut shared.lock().unwrap().lost);
        let server_cwnd = x
            .server
            .and_then(|h| p.server.connection(h))
            .map_or(0, |c| c.path_stats().cwnd);
        if !lost.is_empty() {
            around_loss.push((cwnd, server_cwnd));
        }
        cwnd = server_cwnd;
        let now = p.now;
        let c = p.client.connection_mut(x.client).unwrap();
        for b in lost {
            c.handle_recovered_payload(now, b);
        }
        x.drive(p)
    });
    assert!(ok && x.error.is_none(), "{:?}", x.error);
    assert_eq!(Sha256::digest(&x.flows[0].received), Sha256::digest(&data));
    let stats = pair.server.connection(x.server.unwrap()).unwrap().stats();
    (stats, around_loss)
}

#[test]
fn a_late_recovery_report_cancels_the_queued_retransmission() {
    let (reported, _) = download(Some(RecoveredLossMode::Signal));
    assert_eq!(reported.packets_lost, 1, "{reported:?}");
    assert_eq!(reported.late_recoveries_by_peer, 1, "{reported:?}");
    assert_eq!(reported.packets_retransmitted, 0, "{reported:?}");
    // Without the report, the same loss is retransmitted.
    let (unreported, _) = download(None);
    assert_eq!(unreported.packets_lost, 1, "{unreported:?}");
    assert!(unreported.packets_retransmitted >= 1, "{unreported:?}");
}

#[test]
fn a_masked_late_recovery_undoes_the_window_reduction() {
    // Signalled: the loss cuts the window and the report leaves it cut.
    let (_, signal) = download(Some(RecoveredLossMode::Signal));
    let (before, after) = signal.expect("a loss");
    assert!(after < before, "signal: window {before} -> {after}");
    // Masked: the only loss of the reduction was recovered, so the reduction is undone.
    let (stats, mask) = download(Some(RecoveredLossMode::Mask));
    let (before, after) = mask.expect("a loss");
    assert!(after >= before, "mask: window {before} -> {after}");
    assert_eq!(stats.late_recoveries_by_peer, 1);
}

/// Regression: a loss declared after the window reduction, in the same recovery period,
/// did not join the reduction's losses, so recovering only the first one undid a reduction
/// that a genuine loss still called for.
#[test]
fn a_masked_recovery_does_not_undo_a_reduction_another_loss_stands_for() {
    let (stats, windows) = download_dropping(Some(RecoveredLossMode::Mask), Some(2), &[50, 56]);
    assert_eq!(stats.packets_lost, 2, "{stats:?}");
    assert_eq!(stats.late_recoveries_by_peer, 1, "{stats:?}");
    let [(before, reduced), (_, after)] = windows[..] else {
        panic!("two loss events expected: {windows:?}")
    };
    assert!(
        reduced < before,
        "the first loss cuts the window: {windows:?}"
    );
    assert!(after < before, "the cut stays: {windows:?}");
}

/// An extension frame whose handling delivers a recovered payload holding the same frame with
/// a count one lower, down to 0: a chain of recovered payloads as deep as the first count.
const CHAIN: u64 = 0x3f_00c4_a1e0;

#[derive(Debug)]
struct ChainFactory(Arc<std::sync::atomic::AtomicU64>);

impl ExtensionFactory for ChainFactory {
    fn build(&self, _side: Side) -> Box<dyn ConnectionExtension> {
        Box::new(Chain(self.0.clone()))
    }
}

struct Chain(Arc<std::sync::atomic::AtomicU64>);

fn chain_frame(n: u64) -> Bytes {
    let mut b = Vec::new();
    qfec_proto::coding::put_varint(&mut b, CHAIN);
    qfec_proto::coding::put_varint(&mut b, n);
    b.into()
}

impl ConnectionExtension for Chain {
    fn name(&self) -> &'static str {
        "chain"
    }
    fn owns_frame(&self, ty: u64) -> bool {
        ty == CHAIN
    }
    fn decode_frame(
        &self,
        _ty: u64,
        r: &mut qfec_proto::coding::Reader<'_>,
    ) -> Result<(), qfec_proto::frame::FrameError> {
        r.varint()
            .map(|_| ())
            .map_err(|_| qfec_proto::frame::FrameError::encoding(CHAIN, "truncated"))
    }
    fn on_frame(
        &mut self,
        cx: &mut ExtensionCx<'_>,
        _ty: u64,
        body: &[u8],
        _rest: &[u8],
    ) -> Result<qfec_proto::FrameOutcome, qfec_proto::TransportError> {
        let n = qfec_proto::coding::Reader::new(body).varint().unwrap();
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n > 0 {
            cx.deliver_recovered(chain_frame(n - 1));
        }
        Ok(qfec_proto::FrameOutcome::Continue)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

#[test]
fn recovered_payloads_that_deliver_more_are_processed_one_after_another() {
    // The seam processes a payload an extension recovers while handling another after that
    // one, never inside it: a chain 100 000 payloads long runs in constant stack (recursion
    // would overflow the test thread's 2 MiB).
    let seen = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut server = TransportConfig::default();
    server.extensions.push(Arc::new(ChainFactory(seen.clone())));
    let mut pair = Pair::new(4, server, LinkSpec::default(), LinkSpec::default());
    let ch = pair.connect(TransportConfig::default());
    let mut sh = None;
    assert!(pair.run_until(Duration::from_secs(5), |p| {
        sh = sh.or(p.server.accept());
        p.client.connection(ch).unwrap().handshake_confirmed() && sh.is_some()
    }));
    let now = pair.now;
    let s = pair.server.connection_mut(sh.unwrap()).unwrap();
    s.handle_recovered_payload(now, chain_frame(100_000));
    assert!(s.error().is_none(), "{:?}", s.error());
    assert_eq!(seen.load(std::sync::atomic::Ordering::Relaxed), 100_001);
}
