//! RFC 8682 TinyMT32 and RFC 8681 vectors, and a cross-check of coefficient
//! generation, repair symbols and decoding against `cu-fec`, an independent
//! implementation of RFC 8681.

use cu_fec::{
    DensityThreshold, EncodingSymbolId, Field as CuField, RepairParameters, RepairPayloadId,
    RlcConfig, RlcDecoder as CuDecoder, RlcEncoder as CuEncoder,
};
use qfec_erasure::rlc::{RlcMeta, generate_coding_coefficients};
use qfec_erasure::tinymt::TinyMt32;
use qfec_erasure::{DecoderLimits, Field, Scheme};

/// RFC 8682 section 3 (validation): the first 50 outputs of
/// `tinymt32_generate_uint32` with seed 1.
const TINYMT32_SEED1: [u32; 50] = [
    2545341989, 981918433, 3715302833, 2387538352, 3591001365, 3820442102, 2114400566, 2196103051,
    2783359912, 764534509, 643179475, 1822416315, 881558334, 4207026366, 3690273640, 3240535687,
    2921447122, 3984931427, 4092394160, 44209675, 2188315343, 2908663843, 1834519336, 3774670961,
    3019990707, 4065554902, 1239765502, 4035716197, 3412127188, 552822483, 161364450, 353727785,
    140085994, 149132008, 2547770827, 4064042525, 4078297538, 2057335507, 622384752, 2041665899,
    2193913817, 1080849512, 33160901, 662956935, 642999063, 3384709977, 1723175122, 3866752252,
    521822317, 2292524454,
];

/// RFC 8681 Appendix A: `tinymt32_rand16` with seed 1.
const RAND16_SEED1: [u8; 50] = [
    5, 1, 1, 0, 5, 6, 6, 11, 8, 13, 3, 11, 14, 14, 8, 7, 2, 3, 0, 11, 15, 3, 8, 1, 3, 6, 14, 5, 4,
    3, 2, 9, 10, 8, 11, 13, 2, 3, 0, 11, 9, 8, 5, 7, 7, 9, 2, 12, 13, 6,
];

/// RFC 8681 Appendix A: `tinymt32_rand256` with seed 1.
const RAND256_SEED1: [u8; 50] = [
    37, 225, 177, 176, 21, 246, 54, 139, 168, 237, 211, 187, 62, 190, 104, 135, 210, 99, 176, 11,
    207, 35, 40, 113, 179, 214, 254, 101, 212, 211, 226, 41, 234, 232, 203, 29, 194, 211, 112, 107,
    217, 104, 197, 135, 23, 89, 210, 252, 109, 166,
];

#[test]
fn tinymt32_rfc8682_vectors() {
    let mut g = TinyMt32::new(1);
    for &v in &TINYMT32_SEED1 {
        assert_eq!(g.next_u32(), v);
    }
}

#[test]
fn rand16_rand256_rfc8681_vectors() {
    let mut g = TinyMt32::new(1);
    for &v in &RAND16_SEED1 {
        assert_eq!(g.rand16(), v);
    }
    let mut g = TinyMt32::new(1);
    for &v in &RAND256_SEED1 {
        assert_eq!(g.rand256(), v);
    }
}

fn cu_field(f: Field) -> CuField {
    match f {
        Field::Gf2 => CuField::Gf2,
        Field::Gf256 => CuField::Gf256,
    }
}

/// The rand16 list again, recovered through cu-fec's public coefficient
/// generator (GF(2): coefficient i is `rand16_i <= DT`), so the vectors above
/// are checked against an independent implementation too.
#[test]
fn vectors_cross_checked_with_cu_fec() {
    let mut bits = [[0u8; 50]; 15];
    for (dt, row) in bits.iter_mut().enumerate() {
        cu_fec::generate_coding_coefficients(
            CuField::Gf2,
            1,
            DensityThreshold::new(dt as u8).unwrap(),
            row,
        );
    }
    for i in 0..50 {
        let v = (0..15).find(|&dt| bits[dt][i] == 1).unwrap_or(15) as u8;
        assert_eq!(v, RAND16_SEED1[i], "rand16[{i}]");
    }
    // GF(2^8), DT = 15: nonzero rand256 draws (none of the first 50 is 0).
    let mut cc = [0u8; 50];
    cu_fec::generate_coding_coefficients(CuField::Gf256, 1, DensityThreshold::FULL, &mut cc);
    assert_eq!(cc, RAND256_SEED1);
}

#[test]
fn coefficients_match_cu_fec() {
    for field in [Field::Gf2, Field::Gf256] {
        for key in (0u16..200).chain([1000, 4242, 65535]) {
            for dt in 0..=15u8 {
                for nss in [1usize, 2, 5, 16, 20, 64, 300] {
                    let mut ours = vec![0u8; nss];
                    generate_coding_coefficients(key, &mut ours, dt, field).unwrap();
                    let mut theirs = vec![0u8; nss];
                    cu_fec::generate_coding_coefficients(
                        cu_field(field),
                        key,
                        DensityThreshold::new(dt).unwrap(),
                        &mut theirs,
                    );
                    assert_eq!(ours, theirs, "{field:?} key={key} dt={dt} nss={nss}");
                }
            }
        }
    }
    assert!(generate_coding_coefficients(0, &mut [0u8; 4], 16, Field::Gf256).is_err());
}

fn data(n: usize, size: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            (0..size)
                .map(|j| (i * 131 + j * 7 + (i * j) % 13) as u8)
                .collect()
        })
        .collect()
}

/// Our encoder and cu-fec's produce the same repair bytes and metadata for
/// the same window, key and density.
#[test]
fn repair_symbols_match_cu_fec() {
    const SIZE: usize = 200;
    for field in [Field::Gf256, Field::Gf2] {
        for dt in [15u8, 9, 3, 0] {
            for window in [1u16, 5, 16, 20] {
                let scheme = Scheme::Rlc {
                    window,
                    density: dt,
                    field,
                    interval: 1,
                    repairs: 1,
                };
                let mut ours = scheme.encoder(SIZE).unwrap();
                let config = RlcConfig::new(SIZE, window as usize, cu_field(field)).unwrap();
                let mut theirs =
                    CuEncoder::<SIZE, 32>::new(config, EncodingSymbolId::new(0)).unwrap();
                let src = data(60, SIZE);
                let mut reps = Vec::new();
                for (id, d) in src.iter().enumerate() {
                    ours.add_source(id as u64, d).unwrap();
                    theirs.push_source(d).unwrap();
                    ours.poll_repair(&mut reps);
                    assert_eq!(reps.len(), 1);
                    let r = reps.pop().unwrap();
                    let meta = RlcMeta::parse(r.meta()).unwrap();
                    // Our keys count up from 0; cu-fec requires key 0 for GF(2), DT 15.
                    if field == Field::Gf2 && dt == 15 && meta.repair_key != 0 {
                        continue;
                    }
                    let mut out = [0u8; SIZE];
                    let id_theirs = theirs
                        .encode_repair(
                            RepairParameters::new(
                                meta.repair_key,
                                DensityThreshold::new(dt).unwrap(),
                            ),
                            &mut out,
                        )
                        .unwrap();
                    assert_eq!(
                        &r.payload[..],
                        &out[..],
                        "{field:?} dt={dt} w={window} id={id}"
                    );
                    assert_eq!(r.meta(), &id_theirs.to_bytes()[..]);
                }
            }
        }
    }
}

/// Interoperability: cu-fec's encoder feeding our decoder, and ours feeding
/// cu-fec's decoder, over a lossy channel.
#[test]
fn decoding_interoperates_with_cu_fec() {
    const SIZE: usize = 100;
    let window = 12usize;
    for field in [Field::Gf256, Field::Gf2] {
        let dt = if field == Field::Gf2 { 10 } else { 15 };
        let scheme = Scheme::Rlc {
            window: window as u16,
            density: dt,
            field,
            interval: 3,
            repairs: 1,
        };
        let config = RlcConfig::new(SIZE, window, cu_field(field)).unwrap();
        let src = data(200, SIZE);
        let lost = |id: usize| id % 7 == 3 || id % 11 == 5;

        // cu-fec -> ours
        let mut enc = CuEncoder::<SIZE, 16>::new(config, EncodingSymbolId::new(0)).unwrap();
        let mut dec = scheme.decoder(SIZE, DecoderLimits::default()).unwrap();
        let mut rec = Vec::new();
        let mut recovered = 0;
        for (id, d) in src.iter().enumerate() {
            enc.push_source(d).unwrap();
            if !lost(id) {
                dec.add_source(id as u64, d, &mut rec).unwrap();
            }
            if id % 3 == 2 {
                let mut out = [0u8; SIZE];
                let pid = enc
                    .encode_repair(
                        RepairParameters::new(id as u16 + 1, DensityThreshold::new(dt).unwrap()),
                        &mut out,
                    )
                    .unwrap();
                dec.add_repair(&pid.to_bytes(), &out, &mut rec).unwrap();
            }
            for r in rec.drain(..) {
                assert!(lost(r.id as usize));
                assert_eq!(r.data, src[r.id as usize]);
                recovered += 1;
            }
        }
        assert!(
            recovered > 20,
            "{field:?}: cu-fec -> ours recovered only {recovered}"
        );

        // ours -> cu-fec
        let mut ours = scheme.encoder(SIZE).unwrap();
        let mut cu = CuDecoder::<SIZE, 64, 64>::new(config, 48).unwrap();
        let mut reps = Vec::new();
        let (mut recovered, mut unrecovered) = (0, 0);
        // cu-fec's window slides over the last `window` symbols by itself. A symbol about to
        // leave it is final: cu-fec knows it (received or recovered, with the source's bytes)
        // or it was lost for good.
        let mut settle = |cu: &CuDecoder<SIZE, 64, 64>, e: usize| match cu
            .symbol(EncodingSymbolId::new(e as u32))
        {
            Some(s) => {
                assert_eq!(s, &src[e][..], "{field:?}: symbol {e}");
                recovered += usize::from(lost(e));
            }
            None => {
                assert!(lost(e), "{field:?}: received symbol {e} forgotten");
                unrecovered += 1;
            }
        };
        for (id, d) in src.iter().enumerate() {
            if let Some(e) = id.checked_sub(window) {
                settle(&cu, e);
            }
            ours.add_source(id as u64, d).unwrap();
            if !lost(id) {
                let _report = cu
                    .receive_source(EncodingSymbolId::new(id as u32), d)
                    .unwrap_or_else(|e| panic!("{field:?}: cu-fec refused source {id}: {e:?}"));
            }
            ours.poll_repair(&mut reps);
            for r in reps.drain(..) {
                let pid = RepairPayloadId::from_bytes(r.meta().try_into().unwrap()).unwrap();
                let _report = cu
                    .receive_repair(pid, &r.payload)
                    .unwrap_or_else(|e| panic!("{field:?}: cu-fec refused our repair: {e:?}"));
            }
        }
        for e in src.len() - window..src.len() {
            settle(&cu, e);
        }
        let lost_count = (0..src.len()).filter(|&i| lost(i)).count();
        assert_eq!(recovered + unrecovered, lost_count);
        assert!(
            recovered > 20,
            "{field:?}: ours -> cu-fec recovered only {recovered} ({unrecovered} not)"
        );
    }
}

#[test]
fn meta_roundtrip() {
    let m = RlcMeta {
        repair_key: 0xBEEF,
        dt: 9,
        nss: 4095,
        esi: 0xDEAD_BEEF,
    };
    assert_eq!(RlcMeta::parse(&m.to_bytes()).unwrap(), m);
    assert!(RlcMeta::parse(&[0u8; 7]).is_err());
}
