//! qfec-erasure's decoders (XOR, Reed-Solomon, RLC over GF(2^8) and GF(2)) and the
//! low-level Reed-Solomon codec.
//!
//! The first byte picks a mode:
//! - `hostile`: a decoder fed arbitrary source ids, data, metadata and payloads: never a
//!   panic, every recovered symbol of the symbol size and never one already delivered;
//! - `honest`: an encoder's real output with erasures (and for some runs a reordering) the
//!   fuzzer chooses, possibly mixed with forged repairs: every recovered symbol is the
//!   original; delivered in order with no forgery, every block code block with no more losses
//!   than received repairs is recovered in full;
//! - `rs`: `ReedSolomon::encode` / `reconstruct` with any erasure pattern: exact recovery when
//!   at most m symbols are lost, `TooManyErasures` and no output otherwise.

#![no_main]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use qfec_erasure::block::BlockMeta;
use qfec_erasure::{DecoderLimits, FecError, Field, Recovered, ReedSolomon, RepairSymbol, Scheme};

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let _ = match u.arbitrary::<u8>().unwrap_or(0) % 3 {
        0 => hostile(&mut u),
        1 => honest(&mut u),
        _ => rs_codec(&mut u),
    };
});

/// `QFEC_FUZZ_DEBUG=1` prints what `honest` does (to understand a crash).
fn debug() -> bool {
    static D: OnceLock<bool> = OnceLock::new();
    *D.get_or_init(|| std::env::var_os("QFEC_FUZZ_DEBUG").is_some())
}

/// Any scheme the configuration accepts, kept small so that a run stays fast.
fn scheme(u: &mut Unstructured<'_>) -> Result<Scheme> {
    Ok(match u.int_in_range(0..=2u8)? {
        0 => Scheme::Xor {
            k: u.int_in_range(1..=20)?,
            depth: u.int_in_range(1..=8)?,
        },
        1 => {
            let k = u.int_in_range(1..=40)?;
            Scheme::ReedSolomon {
                k,
                m: u.int_in_range(1..=(255 - k).min(16))?,
            }
        }
        _ => Scheme::Rlc {
            window: u.int_in_range(1..=48)?,
            density: u.int_in_range(0..=15)?,
            field: if u.arbitrary()? {
                Field::Gf256
            } else {
                Field::Gf2
            },
            interval: u.int_in_range(1..=8)?,
            repairs: u.int_in_range(1..=4)?,
        },
    })
}

/// Symbol sizes around the SIMD kernels' widths (16, 32, 64 bytes) and packet sizes.
fn symbol_size(u: &mut Unstructured<'_>) -> Result<usize> {
    Ok(match u.int_in_range(0..=3u8)? {
        0 => u.int_in_range(1..=16)?,
        1 => u.int_in_range(17..=130)?,
        2 => u.int_in_range(1..=300)?,
        _ => u.int_in_range(1000..=1500)?,
    })
}

/// A small deterministic generator for symbol contents (keeps inputs short).
struct Rng(u64);

impl Rng {
    fn fill(&mut self, buf: &mut [u8]) {
        for b in buf {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            *b = (self.0 >> 24) as u8;
        }
    }
}

fn check_recovered(
    rec: &[Recovered],
    size: usize,
    delivered: &mut BTreeSet<u64>,
    originals: Option<&BTreeMap<u64, Vec<u8>>>,
) {
    for r in rec {
        assert_eq!(r.data.len(), size, "recovered symbol of the wrong size");
        assert!(
            delivered.insert(r.id),
            "id {} recovered although received or recovered before",
            r.id
        );
        if let Some(orig) = originals {
            let o = orig
                .get(&r.id)
                .unwrap_or_else(|| panic!("recovered id {} was never sent", r.id));
            assert_eq!(&r.data, o, "id {} recovered with wrong content", r.id);
        }
    }
}

fn hostile(u: &mut Unstructured<'_>) -> Result<()> {
    let scheme = scheme(u)?;
    let size = symbol_size(u)?;
    let limits = DecoderLimits {
        max_blocks: u.int_in_range(0..=40)?,
        max_span: u.int_in_range(0..=600)?,
    };
    let mut dec = scheme.decoder(size, limits).expect("a valid scheme");
    assert_eq!(dec.symbol_size(), size);
    let meta_len = scheme.meta_len();
    let mut delivered = BTreeSet::new();
    let mut rec = Vec::new();
    let mut base: u64 = u.arbitrary()?;
    let mut content = Rng(u.arbitrary::<u64>()? | 1);
    for _ in 0..u.int_in_range(0..=200u16)? {
        rec.clear();
        if u.arbitrary()? {
            // Ids near a base that moves, sometimes anywhere.
            let id = match u.int_in_range(0..=7u8)? {
                0 => u.arbitrary()?,
                1 => u64::MAX - u64::from(u.arbitrary::<u8>()?),
                _ => base.wrapping_add(u64::from(u.arbitrary::<u8>()?)),
            };
            let len = if u.arbitrary()? {
                size
            } else {
                u.int_in_range(0..=size + 2)?
            };
            let mut d = vec![0u8; len];
            content.fill(&mut d);
            match dec.add_source(id, &d, &mut rec) {
                Ok(()) => {
                    assert!(len <= size);
                    delivered.insert(id);
                }
                Err(FecError::SymbolSize) => assert!(len > size),
                Err(_) => {}
            }
        } else {
            let mlen = if u.arbitrary()? {
                meta_len
            } else {
                u.int_in_range(0..=16)?
            };
            let mut meta = u.bytes(mlen)?.to_vec();
            meta.resize(mlen, 0);
            if mlen >= 8 && meta_len == 11 && u.arbitrary()? {
                // Block metadata around the ids in play.
                let first = base.wrapping_add(u64::from(u.arbitrary::<u8>()?));
                meta[..8].copy_from_slice(&first.to_be_bytes());
            }
            let plen = if u.arbitrary()? {
                size
            } else {
                u.int_in_range(0..=size + 2)?
            };
            let mut p = vec![0u8; plen];
            content.fill(&mut p);
            let res = dec.add_repair(&meta, &p, &mut rec);
            if plen != size {
                assert!(
                    res.is_err(),
                    "repair payload of {plen} bytes accepted (size {size})"
                );
            }
        }
        check_recovered(&rec, size, &mut delivered, None);
        if u.int_in_range(0..=15u8)? == 0 {
            base = base.wrapping_add(u64::from(u.arbitrary::<u16>()?));
        }
    }
    Ok(())
}

enum Item {
    Source(u64),
    Repair(usize),
    Forged(Vec<u8>, Vec<u8>),
}

fn honest(u: &mut Unstructured<'_>) -> Result<()> {
    let scheme = scheme(u)?;
    let size = symbol_size(u)?;
    let n = u.int_in_range(1..=96u64)?;
    let first: u64 = match u.int_in_range(0..=3u8)? {
        0 => 0,
        1 => u64::from(u.arbitrary::<u32>()?),
        2 => (1 << 32) - u64::from(u.arbitrary::<u8>()?), // RLC ESI wrap-around
        _ => u.arbitrary::<u64>()? >> 1,
    };
    // RLC carries the low 32 bits of an id, expanded next to the ids seen: before any source
    // arrived, only ids below 2^32 can be placed (SIDs start at 0 in QUIC). So RLC runs stay
    // below 2^32 + n, and those that cross 2^32 deliver their first source first (below).
    let rlc = matches!(scheme, Scheme::Rlc { .. });
    let first = if rlc { first % (1 << 32) } else { first };
    let anchor = rlc && first + n > 1 << 32;
    let mut content = Rng(u.arbitrary::<u64>()? | 1);
    let mut enc = scheme.encoder(size).expect("a valid scheme");
    assert_eq!(enc.symbol_size(), size);
    let mut originals = BTreeMap::new();
    let mut order = Vec::new();
    let mut repairs: Vec<RepairSymbol> = Vec::new();
    for id in first..first + n {
        // Shorter sources are zero-padded, as QUIC packets are.
        let len = if u.arbitrary()? {
            size
        } else {
            u.int_in_range(0..=size)?
        };
        let mut d = vec![0u8; len];
        content.fill(&mut d);
        enc.add_source(id, &d).expect("contiguous ids");
        d.resize(size, 0);
        originals.insert(id, d);
        order.push(Item::Source(id));
        let before = repairs.len();
        enc.poll_repair(&mut repairs);
        order.extend((before..repairs.len()).map(Item::Repair));
    }
    assert_eq!(
        enc.add_source(first + n + 1, &[]),
        Err(FecError::NonContiguous)
    );
    enc.flush();
    let before = repairs.len();
    enc.poll_repair(&mut repairs);
    order.extend((before..repairs.len()).map(Item::Repair));
    for r in &repairs {
        assert_eq!(r.meta().len(), scheme.meta_len());
        assert_eq!(r.payload.len(), size);
    }

    // The fuzzer's erasures (about one in four by default), then perhaps forgeries and a
    // reordering.
    let mut kept = Vec::new();
    for item in order {
        // An exhausted input keeps everything (`int_in_range` then gives its lower bound).
        let drop = u.int_in_range(0..=3u8)? == 3;
        if !drop || (anchor && kept.is_empty()) {
            kept.push(item);
        }
    }
    let mut forged = false;
    if u.int_in_range(0..=7u8)? == 7 {
        for _ in 0..u.int_in_range(1..=4)? {
            let at = u.int_in_range(0..=kept.len())?;
            let meta = match u.int_in_range(0..=1u8)? {
                0 if !repairs.is_empty() => {
                    // A real repair's metadata with another payload.
                    let i = u.choose_index(repairs.len())?;
                    repairs[i].meta().to_vec()
                }
                _ => u.bytes(scheme.meta_len())?.to_vec(),
            };
            let mut p = vec![0u8; size];
            content.fill(&mut p);
            kept.insert(at, Item::Forged(meta, p));
        }
        forged = true;
    }
    let reordered = u.int_in_range(0..=3u8)? == 3;
    if reordered {
        let fixed = usize::from(anchor);
        for i in (fixed + 1..kept.len()).rev() {
            let j = u.int_in_range(fixed..=i)?;
            kept.swap(i, j);
        }
    }

    if debug() {
        eprintln!(
            "{scheme:?} size {size} ids {first}..{} forged {forged} reordered {reordered}",
            first + n
        );
    }
    let mut dec = scheme
        .decoder(size, DecoderLimits::default())
        .expect("a valid scheme");
    let mut delivered = BTreeSet::new();
    let mut rec = Vec::new();
    let mut received_repairs = Vec::new();
    for item in &kept {
        rec.clear();
        match item {
            Item::Source(id) => {
                let res = dec.add_source(*id, &originals[id], &mut rec);
                if res.is_ok() {
                    delivered.insert(*id);
                } else {
                    // Only a symbol recovered already, or one that fell out of the window.
                    assert!(
                        matches!(res, Err(FecError::Duplicate | FecError::OutOfWindow)),
                        "source {id}: {res:?}"
                    );
                    // In order and honest, a source is only refused when recovered before
                    // (a forged repair may claim later ids and move the window on).
                    assert!(
                        reordered || forged || delivered.contains(id),
                        "source {id}: {res:?}"
                    );
                }
            }
            Item::Repair(i) => {
                let r = &repairs[*i];
                let res = dec.add_repair(r.meta(), &r.payload, &mut rec);
                if !reordered && !forged {
                    assert!(
                        matches!(res, Ok(()) | Err(FecError::OutOfWindow)),
                        "honest repair {:?}: {res:?}",
                        r.meta()
                    );
                }
                received_repairs.push(*i);
            }
            Item::Forged(meta, p) => {
                let _ = dec.add_repair(meta, p, &mut rec);
            }
        }
        if debug() {
            let what = match item {
                Item::Source(id) => format!("source {id}"),
                Item::Repair(i) => format!("repair {:02x?}", repairs[*i].meta()),
                Item::Forged(m, _) => format!("forged {m:02x?}"),
            };
            eprintln!(
                "  {what} -> recovered {:?}",
                rec.iter().map(|r| r.id).collect::<Vec<_>>()
            );
        }
        // A forged repair may make a decoder output garbage: only honest runs check content.
        let originals = (!forged).then_some(&originals);
        check_recovered(&rec, size, &mut delivered, originals);
    }
    if reordered || forged {
        return Ok(());
    }

    // In order and honest: block codes recover every block with enough repairs.
    let missing =
        |ids: &mut dyn Iterator<Item = u64>| ids.filter(|id| !delivered.contains(id)).count();
    let mut blocks: BTreeMap<(u64, u16, u8), usize> = BTreeMap::new();
    for i in &received_repairs {
        let meta = repairs[*i].meta();
        let key = match scheme {
            Scheme::Xor { .. } => match BlockMeta::parse_xor(meta) {
                Ok(BlockMeta::Xor {
                    first,
                    stride,
                    count,
                }) => (first, stride, count),
                _ => unreachable!(),
            },
            Scheme::ReedSolomon { .. } => match BlockMeta::parse_rs(meta) {
                Ok(BlockMeta::Rs { first, k, .. }) => (first, 1, k),
                _ => unreachable!(),
            },
            Scheme::Rlc { .. } => return Ok(()),
        };
        *blocks.entry(key).or_default() += 1;
    }
    for ((bfirst, stride, count), nrep) in blocks {
        let mut ids = (0..u64::from(count)).map(|i| bfirst + i * u64::from(stride));
        let lost = missing(&mut ids);
        if lost <= nrep {
            assert_eq!(
                lost, 0,
                "{scheme:?} block at {bfirst} (stride {stride}, {count} sources) has {lost} \
                 unrecovered sources with {nrep} repairs received"
            );
        }
    }
    Ok(())
}

fn rs_codec(u: &mut Unstructured<'_>) -> Result<()> {
    let k = u.int_in_range(1..=60usize)?;
    let m = u.int_in_range(1..=(255 - k).min(20))?;
    let mut rs = ReedSolomon::with_cache(k, m, u.int_in_range(0..=4)?).expect("valid k, m");
    assert_eq!((rs.k(), rs.m()), (k, m));
    let size = symbol_size(u)?;
    let kk = u.int_in_range(1..=k)?; // shortened block
    let mut content = Rng(u.arbitrary::<u64>()? | 1);
    let data: Vec<Vec<u8>> = (0..kk)
        .map(|_| {
            let mut d = vec![0u8; size];
            content.fill(&mut d);
            d
        })
        .collect();
    let mut parity = vec![vec![0u8; size]; m];
    {
        let mut outs: Vec<&mut [u8]> = parity.iter_mut().map(|p| p.as_mut_slice()).collect();
        rs.encode(&data, &mut outs).expect("valid shapes");
    }
    // encode_one agrees with encode.
    let i = u.int_in_range(0..=m - 1)?;
    let mut one = vec![0u8; size];
    rs.encode_one(&data, i, &mut one).expect("valid shapes");
    assert_eq!(one, parity[i]);

    for _ in 0..u.int_in_range(1..=3u8)? {
        let lost: Vec<bool> = (0..kk)
            .map(|_| u.int_in_range(0..=2u8).is_ok_and(|v| v == 2))
            .collect();
        let have_rep: Vec<bool> = (0..m)
            .map(|_| u.int_in_range(0..=2u8).is_ok_and(|v| v != 2))
            .collect();
        let e = lost.iter().filter(|l| **l).count();
        let r = have_rep.iter().filter(|h| **h).count();
        let dv: Vec<Option<&[u8]>> = data
            .iter()
            .zip(&lost)
            .map(|(d, l)| (!l).then_some(&d[..]))
            .collect();
        let rv: Vec<Option<&[u8]>> = parity
            .iter()
            .zip(&have_rep)
            .map(|(p, h)| h.then_some(&p[..]))
            .collect();
        let mut outs = vec![vec![0xa5u8; size]; e];
        let res = {
            let mut refs: Vec<&mut [u8]> = outs.iter_mut().map(|o| o.as_mut_slice()).collect();
            rs.reconstruct(&dv, &rv, &mut refs)
        };
        if e <= r {
            res.unwrap_or_else(|err| panic!("k={k} m={m} kk={kk}: {e} lost, {r} repairs: {err:?}"));
            let lost_data = data.iter().zip(&lost).filter(|(_, l)| **l).map(|(d, _)| d);
            for (o, d) in outs.iter().zip(lost_data) {
                assert_eq!(o, d, "k={k} m={m} kk={kk} wrong reconstruction");
            }
        } else {
            assert_eq!(res, Err(FecError::TooManyErasures));
            assert!(
                outs.iter().all(|o| o.iter().all(|&b| b == 0xa5)),
                "output written on failure"
            );
        }
    }
    // Shapes the API rejects with an error.
    let mut small = vec![0u8; size + 1];
    assert!(rs.encode_one(&data, 0, &mut small).is_err());
    assert!(rs.encode_one(&data, m, &mut one).is_err());
    let none: Vec<Option<&[u8]>> = vec![None; kk];
    let mut outs = vec![vec![0u8; size]; kk.saturating_sub(1)];
    let mut refs: Vec<&mut [u8]> = outs.iter_mut().map(|o| o.as_mut_slice()).collect();
    assert!(rs.reconstruct(&none, &[], &mut refs).is_err());
    Ok(())
}
