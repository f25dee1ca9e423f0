//! Fuzz-style property harness: decoders fed arbitrary metadata, payloads and
//! source ids never panic, never return a symbol of the wrong size, and with
//! an honest stream mixed with malformed repairs never recover wrong data.

use proptest::prelude::*;
use qfec_erasure::{DecoderLimits, FecError, Field, Recovered, Scheme};

const SIZE: usize = 48;

fn schemes() -> Vec<Scheme> {
    vec![
        Scheme::Xor { k: 4, depth: 2 },
        Scheme::ReedSolomon { k: 6, m: 3 },
        Scheme::Rlc {
            window: 8,
            density: 15,
            field: Field::Gf256,
            interval: 2,
            repairs: 1,
        },
        Scheme::Rlc {
            window: 8,
            density: 7,
            field: Field::Gf2,
            interval: 1,
            repairs: 1,
        },
    ]
}

#[derive(Debug, Clone)]
enum Op {
    Source(u64, Vec<u8>),
    Repair(Vec<u8>, Vec<u8>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (
            prop_oneof![0u64..64, any::<u64>()],
            prop::collection::vec(any::<u8>(), 0..SIZE + 3)
        )
            .prop_map(|(id, d)| Op::Source(id, d)),
        (
            prop_oneof![
                prop::collection::vec(any::<u8>(), 0..20),
                prop::collection::vec(any::<u8>(), 8..=8),
                prop::collection::vec(any::<u8>(), 11..=11),
                // Plausible metadata: small ids, small counts.
                (0u64..64, 0u8..10, 0u8..5, 0u8..5).prop_map(|(f, a, b, c)| {
                    let mut v = f.to_be_bytes().to_vec();
                    v.extend([a, b, c]);
                    v
                }),
                (0u16..4, 0u16..16, 0u16..12, 0u32..64).prop_map(|(k, dt, nss, esi)| {
                    let mut v = k.to_be_bytes().to_vec();
                    v.extend(((dt << 12) | nss).to_be_bytes());
                    v.extend(esi.to_be_bytes());
                    v
                }),
            ],
            prop_oneof![
                prop::collection::vec(any::<u8>(), SIZE..=SIZE),
                prop::collection::vec(any::<u8>(), 0..SIZE + 3)
            ]
        )
            .prop_map(|(m, p)| Op::Repair(m, p)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_input_never_panics(which in 0usize..4, ops in prop::collection::vec(op(), 0..80)) {
        let scheme = schemes()[which];
        let limits = DecoderLimits { max_blocks: 4, max_span: 0 };
        let mut dec = scheme.decoder(SIZE, limits).unwrap();
        let mut rec: Vec<Recovered> = Vec::new();
        for op in ops {
            let _ = match op {
                Op::Source(id, d) => dec.add_source(id, &d, &mut rec),
                Op::Repair(m, p) => dec.add_repair(&m, &p, &mut rec),
            };
            for r in rec.drain(..) {
                prop_assert_eq!(r.data.len(), SIZE);
            }
        }
    }

    #[test]
    fn malformed_repairs_are_rejected_and_harmless(which in 0usize..4, seed: u64,
                                                   junk in prop::collection::vec(0u8..8, 1..40)) {
        let scheme = schemes()[which];
        let mut enc = scheme.encoder(SIZE).unwrap();
        let mut dec = scheme.decoder(SIZE, DecoderLimits::default()).unwrap();
        let n = 40usize;
        let data: Vec<Vec<u8>> = (0..n)
            .map(|i| (0..SIZE).map(|j| (seed.rotate_left((i + j) as u32 % 64) as u8) ^ (i * 3 + j) as u8).collect())
            .collect();
        let mut rec = Vec::new();
        let mut reps = Vec::new();
        let mut junk = junk.into_iter().cycle();
        let mut last_valid: Option<(Vec<u8>, Vec<u8>)> = None;
        for (id, d) in data.iter().enumerate() {
            enc.add_source(id as u64, d).unwrap();
            if id % 5 != 1 {
                let r = dec.add_source(id as u64, d, &mut rec);
                prop_assert!(r.is_ok() || r == Err(FecError::Duplicate));
            }
            enc.poll_repair(&mut reps);
            for r in reps.drain(..) {
                // Inject a malformed variant first: it must be rejected.
                let mut meta = r.meta().to_vec();
                let mut payload = r.payload.clone();
                match (junk.next().unwrap(), scheme) {
                    (0, _) => { meta.pop(); }
                    (1, _) => meta.push(0),
                    (2, _) => { payload.pop(); }
                    (3, _) => payload.push(1),
                    (4, Scheme::ReedSolomon { m, .. }) => meta[9] = m + 1,
                    (5, Scheme::ReedSolomon { m, .. }) => meta[10] = m,
                    (6, Scheme::ReedSolomon { k, .. }) => meta[8] = k + 1,
                    (7, Scheme::ReedSolomon { .. }) => meta[8] = 0,
                    (4 | 5, Scheme::Xor { depth, .. }) => meta[9] = (depth + 1) as u8,
                    (6, Scheme::Xor { k, .. }) => meta[10] = k + 1,
                    (7, Scheme::Xor { .. }) => meta[10] = 0,
                    (4 | 5, Scheme::Rlc { .. }) => { meta[2] &= 0xF0; meta[3] = 0; } // NSS 0
                    (6 | 7, Scheme::Rlc { .. }) => { meta[2] = (meta[2] & 0xF0) | 0x0F; } // NSS > window
                    _ => unreachable!(),
                }
                prop_assert!(dec.add_repair(&meta, &payload, &mut rec).is_err());
                prop_assert!(dec.add_repair(r.meta(), &r.payload, &mut rec).is_ok());
                // Exact duplicates are rejected.
                prop_assert_eq!(dec.add_repair(r.meta(), &r.payload, &mut rec), Err(FecError::Duplicate));
                last_valid = Some((r.meta().to_vec(), r.payload.clone()));
            }
            for x in rec.drain(..) {
                prop_assert_eq!(&x.data, &data[x.id as usize]);
            }
        }
        // A repair of the oldest window after the window slid far: out of window.
        if let Some((m, p)) = last_valid {
            let far = 1_000_000u64;
            let r = dec.add_source(far, &data[0], &mut rec);
            prop_assert!(r.is_ok());
            prop_assert_eq!(dec.add_repair(&m, &p, &mut rec).err().map(|e| e == FecError::OutOfWindow || e == FecError::Duplicate), Some(true));
            prop_assert!(rec.is_empty());
        }
    }
}
