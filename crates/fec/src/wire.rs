//! The wire format: transport parameters, frames and scheme identifiers, field by field in
//! `crates/fec/WIRE.md`. Every decoder here takes peer input: it never panics, never reads
//! past its input and allocates nothing whose size the peer chooses.

use qfec_erasure::block::{BLOCK_META_LEN, BlockMeta};
use qfec_erasure::rlc::{RLC_META_LEN, RlcMeta};
use qfec_erasure::{Field, Scheme};
use qfec_proto::coding::{Reader, patch_varint_fixed, put_varint, varint_len};
use qfec_proto::frame::{
    AckRanges, FrameError, ack_range_block_len, decode_ack_range_block, encode_ack_range_block,
};
use qfec_proto::range_set::RangeSet;
use qfec_proto::{TransportError, error_code};

/// Transport parameter ids (draft-michel-quic-fec-01, IANA section).
pub mod param {
    /// `enable_fec`, version 01 of the draft.
    pub const ENABLE_FEC: u64 = 0x238ffece01;
    pub const DECODER_FEC_SCHEME: u64 = 0x238ffecd;
    pub const INITIAL_CODING_WINDOW: u64 = 0x238ffecc;
}

/// Frame types.
pub mod frame_type {
    pub const REPAIR: u64 = 0x32a80fec;
    pub const SID: u64 = 0x32a80fec1d;
    pub const SYMBOL_ACK: u64 = 0x32a80fecac;
    pub const FEC_WINDOW: u64 = 0x32a80fecc0;
    pub const ALL: [u64; 4] = [REPAIR, SID, SYMBOL_ACK, FEC_WINDOW];
}

/// At most this many scheme ids in `decoder_fec_scheme`.
pub const MAX_DECODER_SCHEMES: usize = 16;

/// The code family of a REPAIR frame and of `decoder_fec_scheme` entries. Parameters that the
/// decoder needs travel in each repair's metadata, so one id covers every (k, m) or window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SchemeId {
    /// XOR over interleaved blocks.
    Xor = 1,
    /// Systematic Reed-Solomon over GF(2^8) (scaled Cauchy generator).
    ReedSolomon = 2,
    /// RFC 8681 sliding-window RLC over GF(2^8).
    RlcGf256 = 3,
    /// RFC 8681 sliding-window RLC over GF(2).
    RlcGf2 = 4,
}

impl SchemeId {
    pub const ALL: [SchemeId; 4] = [
        SchemeId::Xor,
        SchemeId::ReedSolomon,
        SchemeId::RlcGf256,
        SchemeId::RlcGf2,
    ];

    pub fn from_u64(v: u64) -> Option<SchemeId> {
        SchemeId::ALL.into_iter().find(|s| *s as u64 == v)
    }

    /// The family of an erasure-code configuration.
    pub fn of(scheme: &Scheme) -> SchemeId {
        match scheme {
            Scheme::Xor { .. } => SchemeId::Xor,
            Scheme::ReedSolomon { .. } => SchemeId::ReedSolomon,
            Scheme::Rlc {
                field: Field::Gf256,
                ..
            } => SchemeId::RlcGf256,
            Scheme::Rlc {
                field: Field::Gf2, ..
            } => SchemeId::RlcGf2,
        }
    }

    /// Length of the repair metadata (Repair FEC Payload ID).
    pub fn meta_len(self) -> usize {
        match self {
            SchemeId::Xor | SchemeId::ReedSolomon => BLOCK_META_LEN,
            SchemeId::RlcGf256 | SchemeId::RlcGf2 => RLC_META_LEN,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SchemeId::Xor => "xor",
            SchemeId::ReedSolomon => "rs",
            SchemeId::RlcGf256 => "rlc",
            SchemeId::RlcGf2 => "rlc-gf2",
        }
    }
}

/// Our FEC transport parameters, or the peer's.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FecParams {
    /// `enable_fec` = 1.
    pub enabled: bool,
    /// Schemes the endpoint decodes, in order of preference.
    pub decoder_schemes: Vec<SchemeId>,
    /// Source symbols the endpoint stores for decoding (0 when absent).
    pub coding_window: u64,
}

fn param_error(reason: &'static str) -> TransportError {
    TransportError::new(error_code::TRANSPORT_PARAMETER_ERROR, reason)
}

impl FecParams {
    /// Appends our parameters as (id, value) pairs.
    pub fn encode(&self, out: &mut Vec<(u64, Vec<u8>)>) {
        let varint = |v: u64| {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            b
        };
        out.push((param::ENABLE_FEC, varint(u64::from(self.enabled))));
        if !self.decoder_schemes.is_empty() {
            let mut b = Vec::new();
            for s in &self.decoder_schemes {
                put_varint(&mut b, *s as u64);
            }
            out.push((param::DECODER_FEC_SCHEME, b));
            out.push((param::INITIAL_CODING_WINDOW, varint(self.coding_window)));
        }
    }

    /// The FEC parameters among a peer's extension parameters. Unknown scheme ids are
    /// skipped (a newer peer may decode more); malformed values are TRANSPORT_PARAMETER_ERROR.
    pub fn decode(extensions: &[(u64, Vec<u8>)]) -> Result<FecParams, TransportError> {
        let mut p = FecParams::default();
        for (id, value) in extensions {
            let mut r = Reader::new(value);
            match *id {
                param::ENABLE_FEC => {
                    p.enabled = match r.varint() {
                        Ok(0) => false,
                        Ok(1) => true,
                        _ => return Err(param_error("enable_fec must be 0 or 1")),
                    };
                }
                param::DECODER_FEC_SCHEME => {
                    let mut n = 0;
                    while !r.is_empty() {
                        let v = r
                            .varint()
                            .map_err(|_| param_error("decoder_fec_scheme truncated"))?;
                        n += 1;
                        if n > MAX_DECODER_SCHEMES {
                            return Err(param_error("decoder_fec_scheme lists too many schemes"));
                        }
                        if let Some(s) = SchemeId::from_u64(v)
                            && !p.decoder_schemes.contains(&s)
                        {
                            p.decoder_schemes.push(s);
                        }
                    }
                }
                param::INITIAL_CODING_WINDOW => {
                    p.coding_window = r
                        .varint()
                        .map_err(|_| param_error("initial_coding_window truncated"))?;
                }
                _ => continue,
            }
            if !r.is_empty() {
                return Err(param_error("FEC transport parameter longer than its value"));
            }
        }
        Ok(p)
    }
}

/// A FEC frame, decoded from its body (the type already read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FecFrame<'a> {
    Sid(u64),
    Repair(Repair<'a>),
    SymbolAck(AckRanges<'a>),
    FecWindow { epoch: u64, size: u64 },
}

/// A REPAIR frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair<'a> {
    pub scheme: SchemeId,
    /// Repair FEC Payload ID, `scheme.meta_len()` bytes.
    pub meta: &'a [u8],
    /// The repair symbol; its length is the sender's symbol size.
    pub symbol: &'a [u8],
}

impl Repair<'_> {
    /// How the repair's source symbols are spaced and how many there are: (distance between
    /// SIDs, count).
    pub fn spacing(&self) -> Result<(u64, u64), FrameError> {
        let bad = |_| FrameError::encoding(frame_type::REPAIR, "malformed repair metadata");
        let (step, count) = match self.scheme {
            SchemeId::Xor => match BlockMeta::parse_xor(self.meta).map_err(bad)? {
                BlockMeta::Xor { stride, count, .. } => (u64::from(stride), u64::from(count)),
                BlockMeta::Rs { .. } => unreachable!("parse_xor returns Xor"),
            },
            SchemeId::ReedSolomon => match BlockMeta::parse_rs(self.meta).map_err(bad)? {
                BlockMeta::Rs { k, .. } => (1, u64::from(k)),
                BlockMeta::Xor { .. } => unreachable!("parse_rs returns Rs"),
            },
            SchemeId::RlcGf256 | SchemeId::RlcGf2 => {
                (1, u64::from(RlcMeta::parse(self.meta).map_err(bad)?.nss))
            }
        };
        if count == 0 || step == 0 {
            return Err(FrameError::encoding(
                frame_type::REPAIR,
                "repair covers no source symbol",
            ));
        }
        Ok((step, count))
    }

    /// Number of SIDs from the first to the last covered one.
    pub fn extent(&self) -> Result<u64, FrameError> {
        let (step, count) = self.spacing()?;
        Ok((count - 1).saturating_mul(step).saturating_add(1))
    }

    /// Repair symbols per block (Reed-Solomon m), which fixes the decoder's shape.
    pub fn rs_repairs(&self) -> Option<u8> {
        match BlockMeta::parse_rs(self.meta) {
            Ok(BlockMeta::Rs { m, .. }) if self.scheme == SchemeId::ReedSolomon => Some(m),
            _ => None,
        }
    }
}

/// Largest symbol size a REPAIR frame may announce (two-byte varint).
pub const MAX_SYMBOL_SIZE: usize = 16_383;

/// Bytes a REPAIR frame adds around its symbol for `scheme`.
pub fn repair_overhead(scheme: SchemeId, symbol_size: usize) -> usize {
    varint_len(frame_type::REPAIR)
        + varint_len(scheme as u64)
        + varint_len(symbol_size as u64)
        + scheme.meta_len()
}

/// Length of a SID frame.
pub fn sid_len(sid: u64) -> usize {
    varint_len(frame_type::SID) + varint_len(sid)
}

/// Writes a SID frame into exactly `sid_len(sid)` bytes.
pub fn write_sid(out: &mut [u8], sid: u64) {
    let t = varint_len(frame_type::SID);
    patch_varint_fixed(out, frame_type::SID, t);
    patch_varint_fixed(&mut out[t..], sid, varint_len(sid));
}

/// Writes a REPAIR frame.
pub fn encode_repair(buf: &mut Vec<u8>, scheme: SchemeId, meta: &[u8], symbol: &[u8]) {
    debug_assert_eq!(meta.len(), scheme.meta_len());
    put_varint(buf, frame_type::REPAIR);
    put_varint(buf, scheme as u64);
    put_varint(buf, symbol.len() as u64);
    buf.extend_from_slice(meta);
    buf.extend_from_slice(symbol);
}

/// Writes a SYMBOL_ACK frame for the top `max_ranges` ranges of `sids` (nothing if empty).
pub fn encode_symbol_ack(buf: &mut Vec<u8>, sids: &RangeSet, max_ranges: usize) {
    let Some(top) = sids.last_range() else {
        return;
    };
    put_varint(buf, frame_type::SYMBOL_ACK);
    put_varint(buf, top.end - 1);
    encode_ack_range_block(buf, sids, max_ranges);
}

/// Exact length of what [`encode_symbol_ack`] writes.
pub fn symbol_ack_len(sids: &RangeSet, max_ranges: usize) -> usize {
    let Some(top) = sids.last_range() else {
        return 0;
    };
    varint_len(frame_type::SYMBOL_ACK)
        + varint_len(top.end - 1)
        + ack_range_block_len(sids, max_ranges)
}

/// Writes a FEC_WINDOW frame.
pub fn encode_fec_window(buf: &mut Vec<u8>, epoch: u64, size: u64) {
    put_varint(buf, frame_type::FEC_WINDOW);
    put_varint(buf, epoch);
    put_varint(buf, size);
}

/// Decodes the body of a FEC frame of type `ty`.
pub fn decode<'a>(ty: u64, r: &mut Reader<'a>) -> Result<FecFrame<'a>, FrameError> {
    let tr = |_| FrameError::encoding(ty, "frame truncated");
    match ty {
        frame_type::SID => Ok(FecFrame::Sid(r.varint().map_err(tr)?)),
        frame_type::REPAIR => {
            let id = r.varint().map_err(tr)?;
            let scheme = SchemeId::from_u64(id)
                .ok_or(FrameError::encoding(ty, "REPAIR with an unknown scheme"))?;
            let size = r.varint().map_err(tr)?;
            if size == 0 || size > MAX_SYMBOL_SIZE as u64 {
                return Err(FrameError::encoding(ty, "REPAIR symbol size out of range"));
            }
            let meta = r.bytes(scheme.meta_len()).map_err(tr)?;
            let symbol = r.bytes(size as usize).map_err(tr)?;
            Ok(FecFrame::Repair(Repair {
                scheme,
                meta,
                symbol,
            }))
        }
        frame_type::SYMBOL_ACK => {
            let largest = r.varint().map_err(tr)?;
            decode_ack_range_block(ty, r, largest).map(FecFrame::SymbolAck)
        }
        frame_type::FEC_WINDOW => Ok(FecFrame::FecWindow {
            epoch: r.varint().map_err(tr)?,
            size: r.varint().map_err(tr)?,
        }),
        _ => Err(FrameError::encoding(ty, "not a FEC frame")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode_all(ty: u64, body: &[u8]) -> Result<(FecFrame<'_>, usize), FrameError> {
        let mut r = Reader::new(body);
        let f = decode(ty, &mut r)?;
        Ok((f, r.position()))
    }

    fn body(buf: &[u8]) -> (u64, &[u8]) {
        let mut r = Reader::new(buf);
        let ty = r.varint().unwrap();
        (ty, r.rest())
    }

    #[test]
    fn sid_frames_decode_to_their_sid() {
        for sid in [0, 63, 64, 16_383, 16_384, 1 << 30, (1 << 62) - 1] {
            let mut b = vec![0u8; sid_len(sid)];
            write_sid(&mut b, sid);
            let (ty, body) = body(&b);
            assert_eq!(ty, frame_type::SID);
            assert_eq!(
                decode_all(ty, body).unwrap(),
                (FecFrame::Sid(sid), body.len())
            );
        }
    }

    #[test]
    fn frame_types_have_the_drafts_sizes() {
        assert_eq!(varint_len(frame_type::REPAIR), 4);
        for t in [
            frame_type::SID,
            frame_type::SYMBOL_ACK,
            frame_type::FEC_WINDOW,
        ] {
            assert_eq!(varint_len(t), 8);
        }
        assert_eq!(sid_len(0), 9);
        assert_eq!(repair_overhead(SchemeId::ReedSolomon, 1400), 4 + 1 + 2 + 11);
    }

    #[test]
    fn repair_roundtrip_and_spacing() {
        let meta = BlockMeta::Xor {
            first: 40,
            stride: 10,
            count: 2,
        }
        .to_bytes();
        let mut buf = Vec::new();
        encode_repair(&mut buf, SchemeId::Xor, &meta, &[7u8; 100]);
        assert_eq!(buf.len(), repair_overhead(SchemeId::Xor, 100) + 100);
        let (ty, b) = body(&buf);
        let (f, used) = decode_all(ty, b).unwrap();
        assert_eq!(used, b.len());
        let FecFrame::Repair(r) = f else {
            panic!("{f:?}")
        };
        assert_eq!(r.spacing().unwrap(), (10, 2));
        assert_eq!(r.extent().unwrap(), 11);
        assert_eq!(r.symbol, &[7u8; 100][..]);
    }

    #[test]
    fn symbol_ack_roundtrip() {
        let mut s = RangeSet::new();
        s.insert(3..5);
        s.insert(9..10);
        s.insert(20..31);
        let mut buf = Vec::new();
        encode_symbol_ack(&mut buf, &s, 16);
        assert_eq!(buf.len(), symbol_ack_len(&s, 16));
        let (ty, b) = body(&buf);
        let FecFrame::SymbolAck(a) = decode_all(ty, b).unwrap().0 else {
            panic!()
        };
        let got: Vec<_> = a.iter().collect();
        assert_eq!(got, vec![20..=30, 9..=9, 3..=4]);
    }

    #[test]
    fn params_roundtrip_and_reject() {
        let p = FecParams {
            enabled: true,
            decoder_schemes: vec![SchemeId::RlcGf256, SchemeId::Xor],
            coding_window: 64,
        };
        let mut out = Vec::new();
        p.encode(&mut out);
        assert_eq!(FecParams::decode(&out).unwrap(), p);
        // Unknown scheme ids are skipped, duplicates kept once.
        let v = vec![(param::DECODER_FEC_SCHEME, vec![0x3f, 1, 1, 3])];
        assert_eq!(
            FecParams::decode(&v).unwrap().decoder_schemes,
            vec![SchemeId::Xor, SchemeId::RlcGf256]
        );
        for bad in [
            vec![(param::ENABLE_FEC, vec![2])],
            vec![(param::ENABLE_FEC, vec![1, 0])],
            vec![(param::ENABLE_FEC, vec![])],
            vec![(param::INITIAL_CODING_WINDOW, vec![0x40])],
            vec![(param::DECODER_FEC_SCHEME, vec![1; 17])],
        ] {
            let e = FecParams::decode(&bad).unwrap_err();
            assert_eq!(e.code, error_code::TRANSPORT_PARAMETER_ERROR, "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn arbitrary_bodies_never_panic(ty in prop::sample::select(frame_type::ALL.to_vec()),
                                        bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            if let Ok((f, used)) = decode_all(ty, &bytes) {
                prop_assert!(used <= bytes.len());
                match f {
                    FecFrame::Repair(r) => {
                        let _ = r.spacing();
                        let _ = r.extent();
                        prop_assert_eq!(r.meta.len(), r.scheme.meta_len());
                    }
                    FecFrame::SymbolAck(a) => {
                        // Ranges descend and never underflow.
                        let mut prev: Option<u64> = None;
                        for range in a.iter().take(1000) {
                            prop_assert!(range.start() <= range.end());
                            if let Some(p) = prev { prop_assert!(*range.end() + 1 < p); }
                            prev = Some(*range.start());
                        }
                    }
                    _ => {}
                }
            }
        }

        /// Valid frames with a few body bytes changed or cut: what decodes re-encodes to the
        /// same frame; an untouched frame must decode whole (a fifth of the cases at least).
        #[test]
        fn mutated_frames_decode_or_refuse(
            which in 0usize..4,
            muts in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
            cut in prop::option::of(any::<prop::sample::Index>()),
        ) {
            let mut buf = Vec::new();
            match which {
                0 => {
                    let meta = BlockMeta::Xor { first: 40, stride: 10, count: 2 }.to_bytes();
                    encode_repair(&mut buf, SchemeId::Xor, &meta, &[7u8; 50]);
                }
                1 => {
                    let mut s = RangeSet::new();
                    s.insert(3..5);
                    s.insert(90..200);
                    encode_symbol_ack(&mut buf, &s, 16);
                }
                2 => {
                    buf = vec![0u8; sid_len(1 << 20)];
                    write_sid(&mut buf, 1 << 20);
                }
                _ => encode_fec_window(&mut buf, 3, 64),
            }
            let (ty, valid) = body(&buf);
            let mut bytes = valid.to_vec();
            let untouched = muts.is_empty() && cut.is_none();
            for (i, v) in muts {
                if !bytes.is_empty() {
                    let i = i.index(bytes.len());
                    bytes[i] = v;
                }
            }
            if let Some(c) = cut {
                bytes.truncate(c.index(bytes.len()));
            }
            match decode_all(ty, &bytes) {
                Ok((f, used)) => {
                    prop_assert!(used <= bytes.len());
                    prop_assert!(!untouched || used == bytes.len(), "{} of {} bytes used", used, bytes.len());
                    let mut again = Vec::new();
                    match &f {
                        FecFrame::Repair(r) => encode_repair(&mut again, r.scheme, r.meta, r.symbol),
                        FecFrame::SymbolAck(a) => {
                            let mut s = RangeSet::new();
                            for r in a.iter().take(1000) { s.insert(*r.start()..*r.end() + 1); }
                            encode_symbol_ack(&mut again, &s, 1000);
                        }
                        FecFrame::Sid(sid) => {
                            again = vec![0u8; sid_len(*sid)];
                            write_sid(&mut again, *sid);
                        }
                        FecFrame::FecWindow { epoch, size } => encode_fec_window(&mut again, *epoch, *size),
                    }
                    let (ty2, body2) = body(&again);
                    prop_assert_eq!(ty2, ty);
                    let f2 = decode_all(ty2, body2).unwrap().0;
                    match (&f, &f2) {
                        // Acknowledged ranges compare by what they say, not their bytes.
                        (FecFrame::SymbolAck(a), FecFrame::SymbolAck(b)) => prop_assert_eq!(
                            a.iter().take(1000).collect::<Vec<_>>(),
                            b.iter().collect::<Vec<_>>()
                        ),
                        _ => prop_assert_eq!(f2, f),
                    }
                }
                Err(e) => prop_assert!(!untouched, "the valid frame was refused: {:?}", e),
            }
        }

        #[test]
        fn arbitrary_params_never_panic(entries in prop::collection::vec(
            (prop::sample::select(vec![param::ENABLE_FEC, param::DECODER_FEC_SCHEME,
                                       param::INITIAL_CODING_WINDOW, 7]),
             prop::collection::vec(any::<u8>(), 0..40)), 0..6)) {
            if let Ok(p) = FecParams::decode(&entries) {
                prop_assert!(p.decoder_schemes.len() <= SchemeId::ALL.len());
            }
        }

        /// Parameters as a peer would send them, some entries' bytes changed: what decodes
        /// re-encodes to the same parameters; untouched ones must decode to what was sent.
        #[test]
        fn mutated_params_decode_or_refuse(
            enabled: bool,
            schemes in prop::collection::vec(prop::sample::select(SchemeId::ALL.to_vec()), 0..4),
            window in 0u64..(1 << 20),
            muts in prop::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>(), any::<u8>()), 0..2),
        ) {
            let mut schemes = schemes;
            let mut seen = Vec::new();
            schemes.retain(|s| !seen.contains(s) && { seen.push(*s); true });
            let sent = FecParams { enabled, decoder_schemes: schemes, coding_window: window };
            let mut entries = Vec::new();
            sent.encode(&mut entries);
            let untouched = muts.is_empty();
            for (e, i, v) in muts {
                let n = entries.len();
                let entry = &mut entries[e.index(n)].1;
                if !entry.is_empty() {
                    let i = i.index(entry.len());
                    entry[i] = v;
                }
            }
            match FecParams::decode(&entries) {
                Ok(p) => {
                    let mut again = Vec::new();
                    p.encode(&mut again);
                    let back = FecParams::decode(&again).unwrap();
                    prop_assert_eq!((back.enabled, &back.decoder_schemes), (p.enabled, &p.decoder_schemes));
                    prop_assert!(p.decoder_schemes.is_empty() || back.coding_window == p.coding_window);
                    if untouched {
                        prop_assert_eq!((p.enabled, &p.decoder_schemes), (sent.enabled, &sent.decoder_schemes));
                        // The window is sent with the schemes only.
                        prop_assert!(sent.decoder_schemes.is_empty() || p.coding_window == sent.coding_window);
                    }
                }
                Err(e) => {
                    prop_assert!(!untouched, "valid parameters refused: {}", e.reason);
                    prop_assert_eq!(e.code, error_code::TRANSPORT_PARAMETER_ERROR);
                }
            }
        }

        #[test]
        fn symbol_ack_roundtrips(starts in prop::collection::btree_set(0u64..100_000, 1..40)) {
            let mut s = RangeSet::new();
            for &x in &starts { s.insert(x * 3..x * 3 + 2); }
            let mut buf = Vec::new();
            encode_symbol_ack(&mut buf, &s, 64);
            let (ty, b) = body(&buf);
            let FecFrame::SymbolAck(a) = decode_all(ty, b).unwrap().0 else { panic!() };
            let mut got = RangeSet::new();
            for r in a.iter() { got.insert(*r.start()..*r.end() + 1); }
            prop_assert_eq!(got.iter().collect::<Vec<_>>(), s.iter().collect::<Vec<_>>());
        }
    }
}
