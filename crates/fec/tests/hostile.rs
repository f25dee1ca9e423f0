//! A hostile peer: a real QUIC endpoint whose extension writes malformed, duplicate,
//! inconsistent or out-of-window FEC frames into its packets. The FEC endpoint never panics,
//! keeps its memory bounded, delivers nothing twice, and closes with the right error code
//! when the peer violates the protocol.

mod common;

use std::any::Any;
use std::time::Duration;

use proptest::prelude::*;
use qfec_erasure::block::BlockMeta;
use qfec_erasure::rlc::RlcMeta;
use qfec_fec::wire::{self, FecParams, SchemeId, frame_type};
use qfec_fec::{FecConfig, FecExtension};
use qfec_proto::coding::{Reader, put_varint};
use qfec_proto::frame::FrameError;
use qfec_proto::{
    ConnectionError, ConnectionExtension, ExtensionCx, ExtensionFactory, ProtectedRegion, Side,
    TransportConfig, error_code,
};
use qfec_testkit::{Exchange, LinkSpec, Pair, payload};

/// What the attacker does.
#[derive(Debug, Clone)]
enum Attack {
    /// A frame of type `ty` with this body, once.
    Raw(u64, Vec<u8>),
    /// Two SID frames in one packet.
    SidTwice,
    /// Every protected packet uses SID 0.
    SidReuse,
    /// The same REPAIR frame again and again.
    DuplicateRepair,
    /// Two REPAIRs of one Reed-Solomon block that disagree on its size.
    Inconsistent,
    /// RLC repair to a receiver that decodes XOR only.
    UnofferedScheme,
    /// A Reed-Solomon block larger than the coding window.
    TooWide,
    /// SYMBOL_ACK of SIDs the receiver never sent.
    SymbolAckUnsent,
    /// Proper SIDs, then REPAIRs for long-gone SIDs in every packet.
    StaleRepairs,
    /// Once, a REPAIR (XOR of one symbol) for a SID never sent, whose recovered symbol is
    /// another such REPAIR, `depth` levels deep, the innermost symbol holding these frames.
    Nested { depth: usize, innermost: Vec<u8> },
}

#[derive(Debug, Clone)]
struct AttackerFactory {
    attack: Attack,
    /// Advertise enable_fec = 1.
    enabled: bool,
}

impl ExtensionFactory for AttackerFactory {
    fn build(&self, _side: Side) -> Box<dyn ConnectionExtension> {
        Box::new(Attacker {
            attack: self.attack.clone(),
            enabled: self.enabled,
            next_sid: 0,
            packets: 0,
            done: false,
        })
    }
}

struct Attacker {
    attack: Attack,
    enabled: bool,
    next_sid: u64,
    packets: u64,
    done: bool,
}

const SYMBOL: usize = 1000;

fn repair_frame(buf: &mut Vec<u8>, scheme: SchemeId, meta: &[u8]) {
    wire::encode_repair(buf, scheme, meta, &[0x5a; SYMBOL]);
}

fn rs_meta(first: u64, k: u8, m: u8, index: u8) -> Vec<u8> {
    BlockMeta::Rs { first, k, m, index }.to_bytes().to_vec()
}

fn xor_meta(first: u64, count: u8) -> Vec<u8> {
    BlockMeta::Xor {
        first,
        stride: 1,
        count,
    }
    .to_bytes()
    .to_vec()
}

impl ConnectionExtension for Attacker {
    fn name(&self) -> &'static str {
        "attacker"
    }
    fn transport_parameters(&self, out: &mut Vec<(u64, Vec<u8>)>) {
        FecParams {
            enabled: self.enabled,
            decoder_schemes: SchemeId::ALL.to_vec(),
            coding_window: 64,
        }
        .encode(out);
    }
    fn owns_frame(&self, ty: u64) -> bool {
        frame_type::ALL.contains(&ty)
    }
    fn decode_frame(&self, ty: u64, r: &mut Reader<'_>) -> Result<(), FrameError> {
        wire::decode(ty, r).map(|_| ())
    }
    fn wants_to_send(&self) -> bool {
        true
    }
    fn write_frames(&mut self, _cx: &mut ExtensionCx<'_>, buf: &mut Vec<u8>, max: usize) -> bool {
        self.packets += 1;
        if max < SYMBOL + 64 || self.packets < 3 {
            return false;
        }
        let start = buf.len();
        match &self.attack {
            Attack::Raw(ty, body) if !self.done => {
                put_varint(buf, *ty);
                buf.extend_from_slice(body);
                self.done = true;
            }
            Attack::SidTwice if self.next_sid > 2 && !self.done => {
                put_varint(buf, frame_type::SID);
                put_varint(buf, 1000);
                self.done = true;
            }
            Attack::DuplicateRepair if self.next_sid > 2 && self.packets.is_multiple_of(2) => {
                repair_frame(buf, SchemeId::Xor, &xor_meta(1, 1));
            }
            // The same Reed-Solomon block first announced with k = 5, then with k = 6.
            Attack::Inconsistent if self.next_sid > 12 && !self.done => {
                repair_frame(buf, SchemeId::ReedSolomon, &rs_meta(4, 5, 2, 0));
                self.done = true;
            }
            Attack::Inconsistent if self.done && self.packets.is_multiple_of(3) => {
                repair_frame(buf, SchemeId::ReedSolomon, &rs_meta(4, 6, 2, 1));
            }
            Attack::UnofferedScheme if self.next_sid > 2 => {
                let meta = RlcMeta {
                    repair_key: 1,
                    dt: 15,
                    nss: 2,
                    esi: 0,
                };
                repair_frame(buf, SchemeId::RlcGf256, &meta.to_bytes());
            }
            Attack::TooWide if self.next_sid > 2 => {
                repair_frame(buf, SchemeId::ReedSolomon, &rs_meta(0, 200, 2, 0));
            }
            Attack::SymbolAckUnsent if !self.done => {
                let mut s = qfec_proto::range_set::RangeSet::new();
                s.insert(3..6);
                wire::encode_symbol_ack(buf, &s, 8);
                self.done = true;
            }
            Attack::Nested { depth, innermost } if self.next_sid > 2 && !self.done => {
                // SIDs base .. base + depth are never sent, only recovered: the REPAIR for
                // base + i is the symbol of base + i + 1 (each level a smaller symbol).
                let base = self.next_sid;
                let mut inner = innermost.clone();
                for i in 0..*depth {
                    let mut outer = Vec::new();
                    wire::encode_repair(
                        &mut outer,
                        SchemeId::Xor,
                        &xor_meta(base + i as u64, 1),
                        &inner,
                    );
                    inner = outer;
                }
                if inner.len() <= max {
                    self.next_sid += *depth as u64;
                    buf.extend_from_slice(&inner);
                    self.done = true;
                }
            }
            Attack::StaleRepairs if self.next_sid > 400 => {
                // Every source is older than the decoder's span by now.
                let first = self.packets % 50;
                repair_frame(buf, SchemeId::Xor, &xor_meta(first, 2));
            }
            _ => {}
        }
        buf.len() > start
    }
    fn begin_protected(
        &mut self,
        _cx: &mut ExtensionCx<'_>,
        room: usize,
    ) -> Option<ProtectedRegion> {
        let header_len = wire::sid_len(self.next_sid);
        Some(ProtectedRegion {
            header_len,
            max_len: SYMBOL.min(room - header_len),
        })
    }
    fn write_protected_header(&mut self, header: &mut [u8]) {
        let sid = if matches!(self.attack, Attack::SidReuse) {
            0
        } else {
            self.next_sid
        };
        wire::write_sid(header, sid);
        self.next_sid += 1;
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// What an attack did to the server.
struct Outcome {
    /// The server's close error code (None if it did not close on an error).
    code: Option<u64>,
    /// And its reason.
    reason: Option<String>,
    stats: qfec_fec::FecStats,
    /// Whether the upload arrived whole and exact.
    whole: bool,
    /// DATAGRAM payloads the server received.
    datagrams: Vec<Vec<u8>>,
}

/// The attacker (client) uploads to a FEC server decoding `decode` (which also takes
/// DATAGRAMs).
fn run_attack(attack: Attack, enabled: bool, decode: &[SchemeId]) -> Outcome {
    let mut server = TransportConfig {
        max_datagram_frame_size: Some(1200),
        ..TransportConfig::default()
    };
    let mut f = FecConfig::new(None);
    f.decode = decode.to_vec();
    f.install(&mut server);
    let mut client = TransportConfig::default();
    client
        .extensions
        .push(std::sync::Arc::new(AttackerFactory { attack, enabled }));
    let link = LinkSpec {
        delay: Duration::from_millis(5),
        ..LinkSpec::default()
    };
    let mut pair = Pair::new(9, server, link.clone(), link);
    let ch = pair.connect(client);
    let data = payload(600_000, 9);
    let mut x = Exchange::new(ch, data.clone(), Vec::new());
    x.run(&mut pair, Duration::from_secs(30));
    let h = x.server.expect("server connection");
    let c = pair.server.connection_mut(h).expect("server state");
    let stats = c.extension::<FecExtension>().unwrap().stats();
    // Our own close; the attacker may also close (its random frames include CONNECTION_CLOSE).
    let (code, reason) = match c.error() {
        Some(ConnectionError::TransportError(e)) => (Some(e.code), Some(e.reason.to_string())),
        _ => (None, None),
    };
    // The exchange read what arrived while it ran.
    let mut datagrams = x.flows[1].datagrams_in.clone();
    while let Some(d) = c.recv_datagram() {
        datagrams.push(d.to_vec());
    }
    Outcome {
        code,
        reason,
        stats,
        whole: x.flows[1].received == data,
        datagrams,
    }
}

/// [`run_attack`]'s close code, FEC counters and whether the upload arrived whole.
fn attack(
    attack: Attack,
    enabled: bool,
    decode: &[SchemeId],
) -> (Option<u64>, qfec_fec::FecStats, bool) {
    let o = run_attack(attack, enabled, decode);
    (o.code, o.stats, o.whole)
}

const ALL: &[SchemeId] = &SchemeId::ALL;
const PV: Option<u64> = Some(error_code::PROTOCOL_VIOLATION);

#[test]
fn protocol_violations_close_with_protocol_violation() {
    for a in [
        Attack::SidTwice,
        Attack::SidReuse,
        Attack::Inconsistent,
        Attack::TooWide,
        Attack::SymbolAckUnsent,
    ] {
        assert_eq!(attack(a.clone(), true, ALL).0, PV, "{a:?}");
    }
    assert_eq!(
        attack(Attack::UnofferedScheme, true, &[SchemeId::Xor]).0,
        PV
    );
    // FEC frames from a peer that did not enable FEC.
    assert_eq!(attack(Attack::SidReuse, false, ALL).0, PV);
}

/// The same REPAIR frame again is what a sender that puts each packet on every path of a
/// multipath connection sends: ignored, not a violation (a SID reused with other frames
/// still is, above).
#[test]
fn a_repeated_repair_is_ignored() {
    let (code, stats, whole) = attack(Attack::DuplicateRepair, true, ALL);
    assert_eq!(code, None);
    assert!(whole, "the upload arrived whole");
    assert!(stats.duplicate_repairs > 0, "{stats:?}");
}

#[test]
fn malformed_frames_close_with_frame_encoding_error() {
    let fee = Some(error_code::FRAME_ENCODING_ERROR);
    // Unknown scheme, zero symbol size, symbol size beyond 16383 (frames after a malformed
    // one are read as its body, so these are the errors that stay malformed).
    assert_eq!(
        attack(Attack::Raw(frame_type::REPAIR, vec![9, 1, 0]), true, ALL).0,
        fee
    );
    assert_eq!(
        attack(Attack::Raw(frame_type::REPAIR, vec![1, 0]), true, ALL).0,
        fee
    );
    assert_eq!(
        attack(
            Attack::Raw(frame_type::REPAIR, vec![1, 0x80, 0, 0x40, 0]),
            true,
            ALL
        )
        .0,
        fee
    );
    // A SYMBOL_ACK whose ranges go below zero.
    assert_eq!(
        attack(
            Attack::Raw(frame_type::SYMBOL_ACK, vec![2, 0, 5]),
            true,
            ALL
        )
        .0,
        fee
    );
}

#[test]
fn stale_repairs_at_line_rate_are_ignored_and_bounded() {
    let (code, s, whole) = attack(Attack::StaleRepairs, true, ALL);
    assert_eq!(code, None);
    assert!(whole, "the upload went through");
    assert!(s.repairs_ignored > 50, "{s:?}");
    assert_eq!(s.symbols_recovered, 0);
}

/// A DATAGRAM frame (type 0x31, with a length) carrying `data`, after `before`, zero-padded
/// to a full symbol: a REPAIR's symbol may not be smaller than the source symbols the
/// receiver already holds.
fn symbol_with_datagram(before: &[u8], data: &[u8]) -> Vec<u8> {
    let mut f = before.to_vec();
    put_varint(&mut f, 0x31);
    put_varint(&mut f, data.len() as u64);
    f.extend_from_slice(data);
    f.resize(SYMBOL, 0);
    f
}

#[test]
fn a_recovered_symbol_carrying_repairs_is_processed_one_level_at_a_time() {
    // Five levels: each recovered symbol holds the REPAIR that recovers the next (each level
    // 17 bytes smaller); the innermost a DATAGRAM. The seam runs each recovered payload after
    // the one before it, not inside it, so every level is processed and the DATAGRAM arrives
    // once.
    let o = run_attack(
        Attack::Nested {
            depth: 5,
            innermost: symbol_with_datagram(&[], b"nested"),
        },
        true,
        ALL,
    );
    assert_eq!((o.code, o.reason), (None, None), "{:?}", o.stats);
    assert!(o.whole, "the upload went through");
    assert_eq!(o.stats.symbols_recovered, 5, "{:?}", o.stats);
    assert_eq!(o.stats.repair_symbols_received, 5, "{:?}", o.stats);
    assert_eq!(o.datagrams, vec![b"nested".to_vec()]);
}

#[test]
fn a_recovered_symbol_carrying_a_sid_is_a_protocol_violation() {
    let mut sid = Vec::new();
    put_varint(&mut sid, frame_type::SID);
    put_varint(&mut sid, 5000);
    for depth in [1, 3] {
        let o = run_attack(
            Attack::Nested {
                depth,
                innermost: symbol_with_datagram(&sid, b"smuggled"),
            },
            true,
            ALL,
        );
        assert_eq!(o.code, PV, "depth {depth}");
        assert_eq!(
            o.reason.as_deref(),
            Some("SID frame inside a recovered symbol"),
            "depth {depth}"
        );
        assert_eq!(o.stats.symbols_recovered, depth as u64);
        assert!(
            o.datagrams.is_empty(),
            "nothing after the SID was delivered"
        );
    }
}

/// A REPAIR whose symbols are smaller than the source symbols the receiver holds is no
/// violation since symbol sizes follow the path's packet size (a sender whose path MTU went
/// down starts a code of smaller symbols): the receiver builds a decoder of the smaller size,
/// keeps the larger symbols aside, and the repair recovers its symbol. (It was refused as a
/// protocol violation while symbol sizes were fixed.)
#[test]
fn a_repair_smaller_than_the_symbols_held_starts_a_smaller_decoder() {
    let mut small = Vec::new();
    put_varint(&mut small, 0x31);
    put_varint(&mut small, 4);
    small.extend_from_slice(b"tiny");
    let o = run_attack(
        Attack::Nested {
            depth: 1,
            innermost: small,
        },
        true,
        ALL,
    );
    assert_eq!((o.code, o.reason), (None, None), "{:?}", o.stats);
    assert!(o.whole, "the upload went through");
    assert_eq!(o.stats.symbols_recovered, 1, "{:?}", o.stats);
    assert_eq!(o.datagrams, vec![b"tiny".to_vec()]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Arbitrary bodies after each FEC frame type (read on as other frames, too): no panic,
    /// and any close is with a transport error code.
    #[test]
    fn arbitrary_fec_frames_never_panic(ty in prop::sample::select(frame_type::ALL.to_vec()),
                                        body in prop::collection::vec(any::<u8>(), 0..64)) {
        let (code, _, _) = attack(Attack::Raw(ty, body), true, ALL);
        prop_assert!(code.is_none_or(|c| c < 0x100), "closed with {code:?}");
    }
}
