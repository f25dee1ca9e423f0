//! qfec-fec's wire decoders: REPAIR, SID, SYMBOL_ACK and FEC_WINDOW frame bodies, and the FEC
//! transport parameters (raw, and through `TransportParameters::decode` as a connection sees
//! them). What decodes is written again with the crate's encoders and must decode the same.

#![no_main]

use libfuzzer_sys::fuzz_target;
use qfec_fec::wire::{self, FecFrame, FecParams, SchemeId, frame_type};
use qfec_proto::Side;
use qfec_proto::coding::Reader;
use qfec_proto::range_set::RangeSet;
use qfec_proto::transport_params::TransportParameters;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, body)) = data.split_first() else {
        return;
    };
    match sel % 6 {
        0..=3 => frame(frame_type::ALL[usize::from(sel % 4)], body),
        4 => {
            // An arbitrary type first: only the four FEC types may decode.
            let mut r = Reader::new(body);
            let Ok(ty) = r.varint() else { return };
            if frame_type::ALL.contains(&ty) {
                frame(ty, r.rest());
            } else {
                assert!(wire::decode(ty, &mut r).is_err());
            }
        }
        _ => params(body),
    }
});

fn frame(ty: u64, body: &[u8]) {
    let mut r = Reader::new(body);
    let res = wire::decode(ty, &mut r);
    let used = r.position();
    assert!(used <= body.len());
    let Ok(f) = res else { return };
    let mut buf = Vec::new();
    match &f {
        FecFrame::Sid(sid) => {
            buf.resize(wire::sid_len(*sid), 0);
            wire::write_sid(&mut buf, *sid);
        }
        FecFrame::Repair(rep) => {
            assert_eq!(rep.meta.len(), rep.scheme.meta_len());
            assert!(!rep.symbol.is_empty() && rep.symbol.len() <= wire::MAX_SYMBOL_SIZE);
            if let Ok((step, count)) = rep.spacing() {
                assert!(step >= 1 && count >= 1);
                let extent = rep.extent().unwrap();
                assert!(extent >= count);
            }
            let _ = rep.rs_repairs();
            wire::encode_repair(&mut buf, rep.scheme, rep.meta, rep.symbol);
            assert_eq!(
                buf.len(),
                wire::repair_overhead(rep.scheme, rep.symbol.len()) + rep.symbol.len()
            );
            assert_eq!(SchemeId::from_u64(rep.scheme as u64), Some(rep.scheme));
        }
        FecFrame::SymbolAck(ranges) => {
            let mut set = RangeSet::new();
            let mut list = Vec::new();
            for r in ranges.iter() {
                assert!(list.len() as u64 <= ranges.count());
                set.insert(*r.start()..*r.end() + 1);
                list.push(r);
            }
            assert_eq!(list.len() as u64, ranges.count());
            wire::encode_symbol_ack(&mut buf, &set, usize::MAX);
            assert_eq!(buf.len(), wire::symbol_ack_len(&set, usize::MAX));
            let (t, b) = split_type(&buf);
            assert_eq!(t, frame_type::SYMBOL_ACK);
            let mut r2 = Reader::new(b);
            match wire::decode(t, &mut r2) {
                Ok(FecFrame::SymbolAck(again)) => {
                    assert_eq!(again.iter().collect::<Vec<_>>(), list);
                    assert!(r2.is_empty());
                }
                other => panic!("re-encoded SYMBOL_ACK decodes as {other:?}"),
            }
            return;
        }
        FecFrame::FecWindow { epoch, size } => wire::encode_fec_window(&mut buf, *epoch, *size),
    }
    let (t, b) = split_type(&buf);
    assert_eq!(t, ty);
    let mut r2 = Reader::new(b);
    assert_eq!(wire::decode(t, &mut r2).as_ref(), Ok(&f));
    assert!(r2.is_empty(), "re-encoded {f:?} left bytes");
}

fn split_type(buf: &[u8]) -> (u64, &[u8]) {
    let mut r = Reader::new(buf);
    let t = r.varint().expect("a frame type");
    (t, r.rest())
}

fn params(body: &[u8]) {
    // As a list of (id, value) read here, and as the extensions of decoded parameters.
    let mut r = Reader::new(body);
    let mut list = Vec::new();
    while let (Ok(id), Ok(v)) = (r.varint(), r.varint_bytes()) {
        list.push((id, v.to_vec()));
    }
    param_list(&list);
    for side in [Side::Client, Side::Server] {
        if let Ok(tp) = TransportParameters::decode(body, side) {
            param_list(&tp.extensions);
        }
    }
}

fn param_list(list: &[(u64, Vec<u8>)]) {
    let Ok(p) = FecParams::decode(list) else {
        return;
    };
    assert!(p.decoder_schemes.len() <= wire::MAX_DECODER_SCHEMES);
    let mut out = Vec::new();
    p.encode(&mut out);
    let again = FecParams::decode(&out).expect("our own FEC parameters decode");
    // The coding window is only sent along with a scheme list.
    let mut expect = p.clone();
    if expect.decoder_schemes.is_empty() {
        expect.coding_window = 0;
    }
    assert_eq!(again, expect);
}
