//! Erasure-coding benchmark: `cargo bench -p qfec-erasure --bench codec`
//! (`QFEC_BENCH_QUICK=1` or `-- --quick` for a short run).
//!
//! 1200-byte symbols. Reed-Solomon encode and decode (m losses, a fresh random
//! loss pattern per block) for (k, m) = (5,1), (10,2), (20,10), (32,4), side by
//! side with `fec-rs` and `reed-solomon-erasure` (with its `simd-accel` C
//! backend); RLC repair generation (windows of 5 and 16) and RLC decoding of
//! 1-4 losses in a window of 20, side by side with `cu-fec`. Throughput is in
//! MB/s (10^6 bytes) of source data; ratios are ours / theirs. Each number is
//! the best of 5 trials of 0.15 s, the trials of the libraries being compared
//! interleaved so that load changes on a shared machine hit them alike.

use std::hint::black_box;
use std::time::{Duration, Instant};

use cu_fec::{
    DensityThreshold, EncodingSymbolId, Field as CuField, RepairParameters, RepairPayloadId,
    RlcConfig, RlcDecoder as CuDecoder, RlcEncoder as CuEncoder,
};
use qfec_erasure::rlc::RlcEncoder;
use qfec_erasure::{DecoderLimits, FecDecoder, FecEncoder, Field, ReedSolomon, Scheme};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng, rngs::StdRng};

const SIZE: usize = 1200;
const BLOCKS: usize = 8;
const PATTERNS: usize = 1024;

struct Timer {
    budget: Duration,
    trials: usize,
}

impl Timer {
    /// Throughput (MB/s, best trial) of several closures, their trials
    /// interleaved so that a change of machine load hits all of them alike.
    fn compare(&self, bytes: usize, fs: &mut [&mut dyn FnMut(usize)]) -> Vec<f64> {
        let one = Timer {
            budget: self.budget,
            trials: 1,
        };
        let mut best = vec![0f64; fs.len()];
        for _ in 0..self.trials {
            for (f, b) in fs.iter_mut().zip(best.iter_mut()) {
                *b = b.max(one.measure(bytes, &mut **f));
            }
        }
        best
    }

    /// Best throughput (MB/s) over the trials of `f`, which processes `bytes`
    /// source bytes per call.
    fn measure(&self, bytes: usize, mut f: impl FnMut(usize)) -> f64 {
        // Warm-up.
        for i in 0..8 {
            f(i);
        }
        let mut best = 0f64;
        let mut iter = 0usize;
        for _ in 0..self.trials {
            let start = Instant::now();
            let mut n = 0usize;
            loop {
                for _ in 0..16 {
                    f(iter);
                    iter += 1;
                }
                n += 16;
                let el = start.elapsed();
                if el >= self.budget {
                    let mbs = (n * bytes) as f64 / el.as_secs_f64() / 1e6;
                    best = best.max(mbs);
                    break;
                }
            }
        }
        best
    }
}

fn random_blocks(rng: &mut StdRng, k: usize) -> Vec<Vec<Vec<u8>>> {
    (0..BLOCKS)
        .map(|_| {
            (0..k)
                .map(|_| {
                    let mut v = vec![0u8; SIZE];
                    rng.fill(&mut v[..]);
                    v
                })
                .collect()
        })
        .collect()
}

/// `PATTERNS` random sets of `m` lost indices among `n`.
fn patterns(rng: &mut StdRng, n: usize, m: usize) -> Vec<Vec<bool>> {
    (0..PATTERNS)
        .map(|_| {
            let mut idx: Vec<usize> = (0..n).collect();
            idx.shuffle(rng);
            let mut lost = vec![false; n];
            for &i in &idx[..m] {
                lost[i] = true;
            }
            lost
        })
        .collect()
}

struct Row {
    shape: String,
    op: String,
    ours: f64,
    refs: Vec<(&'static str, f64)>,
}

fn rs_rows(t: &Timer, k: usize, m: usize, rows: &mut Vec<Row>) {
    let mut rng = StdRng::seed_from_u64((k * 1000 + m) as u64);
    let data = random_blocks(&mut rng, k);
    let pats = patterns(&mut rng, k + m, m);
    let bytes = k * SIZE;

    let mut rs = ReedSolomon::new(k, m).unwrap();
    let mut parity: Vec<Vec<Vec<u8>>> = vec![vec![vec![0u8; SIZE]; m]; BLOCKS];
    let frs = fec_rs::ReedSolomon::new(k, m).unwrap();
    let mut fshards: Vec<Vec<Vec<u8>>> = data
        .iter()
        .map(|b| {
            let mut s = b.clone();
            s.extend((0..m).map(|_| vec![0u8; SIZE]));
            s
        })
        .collect();
    let rse = reed_solomon_erasure::galois_8::ReedSolomon::new(k, m).unwrap();
    let mut rshards = fshards.clone();

    // ---- encode (slice tables built once, as fec-rs and rs-erasure take
    // their shard vectors directly)
    let mut prefs: Vec<Vec<&mut [u8]>> = parity
        .iter_mut()
        .map(|b| b.iter_mut().map(|p| p.as_mut_slice()).collect())
        .collect();
    let mut enc_ours = |i: usize| {
        let b = i % BLOCKS;
        rs.encode(&data[b], &mut prefs[b]).unwrap();
        black_box(&prefs[b]);
    };
    let mut enc_frs = |i: usize| {
        let b = i % BLOCKS;
        frs.encode(&mut fshards[b]).unwrap();
        black_box(&fshards[b]);
    };
    let mut enc_rse = |i: usize| {
        let b = i % BLOCKS;
        rse.encode(&mut rshards[b]).unwrap();
        black_box(&rshards[b]);
    };
    let enc = t.compare(bytes, &mut [&mut enc_ours, &mut enc_frs, &mut enc_rse]);
    for b in 0..BLOCKS {
        enc_ours(b);
        enc_frs(b);
        enc_rse(b);
    }
    drop(prefs);

    // ---- decode
    let mut outs = vec![vec![0u8; SIZE]; m];
    let mut check = |i: usize, verify: bool| {
        let b = i % BLOCKS;
        let lost = &pats[i % PATTERNS];
        let mut dopt: [Option<&[u8]>; 64] = [None; 64];
        let mut ropt: [Option<&[u8]>; 64] = [None; 64];
        let mut nl = 0;
        for j in 0..k {
            if lost[j] {
                nl += 1;
            } else {
                dopt[j] = Some(&data[b][j]);
            }
        }
        for r in 0..m {
            if !lost[k + r] {
                ropt[r] = Some(&parity[b][r]);
            }
        }
        let mut o: Vec<&mut [u8]> = outs[..nl].iter_mut().map(|o| o.as_mut_slice()).collect();
        rs.reconstruct(&dopt[..k], &ropt[..m], &mut o).unwrap();
        if verify {
            let mut t = 0;
            for j in 0..k {
                if lost[j] {
                    assert_eq!(o[t], &data[b][j][..], "decode check");
                    t += 1;
                }
            }
        }
        black_box(&o);
    };
    for i in 0..64 {
        check(i, true);
    }
    let mut dec_ours = |i: usize| check(i, false);
    let mut fopt: Vec<Vec<Option<Vec<u8>>>> = fshards
        .iter()
        .map(|s| s.iter().cloned().map(Some).collect())
        .collect();
    let mut dec_frs = |i: usize| {
        let b = i % BLOCKS;
        let lost = &pats[i % PATTERNS];
        let mut stash: Vec<(usize, Vec<u8>)> = Vec::with_capacity(m);
        for (j, &l) in lost.iter().enumerate() {
            if l {
                stash.push((j, fopt[b][j].take().unwrap()));
            }
        }
        frs.reconstruct_data(&mut fopt[b]).unwrap();
        for (j, v) in stash {
            if fopt[b][j].is_none() {
                fopt[b][j] = Some(v);
            }
        }
        black_box(&fopt[b]);
    };
    let mut dec_rse = |i: usize| {
        let b = i % BLOCKS;
        let lost = &pats[i % PATTERNS];
        let mut sl: Vec<(&mut [u8], bool)> = rshards[b]
            .iter_mut()
            .zip(lost)
            .map(|(s, &l)| (s.as_mut_slice(), !l))
            .collect();
        rse.reconstruct_data(&mut sl).unwrap();
        black_box(&sl);
    };
    let dec = t.compare(bytes, &mut [&mut dec_ours, &mut dec_frs, &mut dec_rse]);

    let shape = format!("RS ({k},{m})");
    rows.push(Row {
        shape: shape.clone(),
        op: "encode".into(),
        ours: enc[0],
        refs: vec![("fec-rs", enc[1]), ("rs-erasure", enc[2])],
    });
    rows.push(Row {
        shape,
        op: format!("decode {m} lost"),
        ours: dec[0],
        refs: vec![("fec-rs", dec[1]), ("rs-erasure", dec[2])],
    });
}

fn rlc_repair_rows(t: &Timer, window: usize, rows: &mut Vec<Row>) {
    let mut rng = StdRng::seed_from_u64(window as u64);
    let src = random_blocks(&mut rng, window).remove(0);
    let bytes = window * SIZE;
    let scheme = Scheme::Rlc {
        window: window as u16,
        density: 15,
        field: Field::Gf256,
        interval: u16::MAX,
        repairs: 1,
    };
    let mut enc = RlcEncoder::new(scheme, SIZE).unwrap();
    for (id, d) in src.iter().enumerate() {
        enc.add_source(id as u64, d).unwrap();
    }
    let mut out = Vec::new();
    let mut ours = |_: usize| {
        enc.emit_repair();
        enc.poll_repair(&mut out);
        for r in out.drain(..) {
            black_box(&r.payload);
            enc.recycle(r);
        }
    };
    let config = RlcConfig::new(SIZE, window, CuField::Gf256).unwrap();
    let mut cu = Box::new(CuEncoder::<SIZE, 16>::new(config, EncodingSymbolId::new(0)).unwrap());
    for d in &src {
        cu.push_source(d).unwrap();
    }
    let mut buf = vec![0u8; SIZE];
    let mut theirs = |i: usize| {
        let p = RepairParameters::new(i as u16, DensityThreshold::FULL);
        black_box(cu.encode_repair(p, &mut buf).unwrap());
    };
    let r = t.compare(bytes, &mut [&mut ours, &mut theirs]);
    let (ours, theirs) = (r[0], r[1]);
    rows.push(Row {
        shape: format!("RLC w={window}"),
        op: "repair".into(),
        ours,
        refs: vec![("cu-fec", theirs)],
    });
}

fn rlc_decode_rows(t: &Timer, losses: usize, rows: &mut Vec<Row>) {
    const W: usize = 20;
    const NB: usize = 32;
    let mut rng = StdRng::seed_from_u64(100 + losses as u64);
    // NB windows of 20 sources, each followed by `losses` repairs over it.
    let scheme = Scheme::Rlc {
        window: W as u16,
        density: 15,
        field: Field::Gf256,
        interval: W as u16,
        repairs: losses as u8,
    };
    let mut enc = scheme.encoder(SIZE).unwrap();
    let mut src = Vec::new();
    let mut reps = Vec::new();
    for b in 0..NB {
        let blk = random_blocks(&mut rng, W).remove(0);
        for (j, d) in blk.iter().enumerate() {
            enc.add_source((b * W + j) as u64, d).unwrap();
        }
        let mut r = Vec::new();
        enc.poll_repair(&mut r);
        assert_eq!(r.len(), losses);
        src.push(blk);
        reps.push(r);
    }
    let pats = patterns(&mut rng, W, losses);
    let bytes = W * SIZE;

    // Ours: a stream of windows; ids keep increasing, ESIs are patched.
    let mut dec = scheme.decoder(SIZE, DecoderLimits::default()).unwrap();
    let mut rec = Vec::new();
    let mut run = |dec: &mut Box<dyn FecDecoder>, i: usize, verify: bool| {
        let b = i % NB;
        let base = (i * W) as u64;
        let lost = &pats[i % PATTERNS];
        for j in 0..W {
            if !lost[j] {
                dec.add_source(base + j as u64, &src[b][j], &mut rec)
                    .unwrap();
            }
        }
        for r in &reps[b] {
            let mut meta = [0u8; 8];
            meta.copy_from_slice(r.meta());
            meta[4..].copy_from_slice(&(base as u32).to_be_bytes());
            dec.add_repair(&meta, &r.payload, &mut rec).unwrap();
        }
        if verify {
            assert_eq!(rec.len(), losses, "RLC decode check");
            for x in &rec {
                assert_eq!(x.data, src[b][(x.id - base) as usize]);
            }
        }
        rec.clear();
    };
    for i in 0..64 {
        run(&mut dec, i, true);
    }
    let mut i0 = 64;
    let mut ours = |_: usize| {
        run(&mut dec, i0, false);
        i0 += 1;
    };
    // cu-fec on the same stream (ESIs wrap at 2^32; fine here).
    let config = RlcConfig::new(SIZE, W, CuField::Gf256).unwrap();
    let mut cu = Box::new(CuDecoder::<SIZE, 64, 32>::new(config, 32).unwrap());
    let mut cu_run = |i: usize| -> usize {
        let b = i % NB;
        let base = (i * W) as u32;
        let lost = &pats[i % PATTERNS];
        let mut n = 0;
        if base >= W as u32 * 2 {
            let _ = cu.discard_before(EncodingSymbolId::new(base - W as u32));
        }
        for j in 0..W {
            if lost[j] {
                continue;
            }
            if let Ok(r) = cu.receive_source(EncodingSymbolId::new(base + j as u32), &src[b][j]) {
                n += r.recovered();
            }
        }
        for r in &reps[b] {
            let mut meta = [0u8; 8];
            meta.copy_from_slice(r.meta());
            meta[4..].copy_from_slice(&base.to_be_bytes());
            let pid = RepairPayloadId::from_bytes(meta).unwrap();
            if let Ok(r) = cu.receive_repair(pid, &r.payload) {
                n += r.recovered();
            }
        }
        n
    };
    let got: usize = (0..64).map(&mut cu_run).sum();
    assert_eq!(got, 64 * losses, "cu-fec decode check");
    let mut j0 = 64usize;
    let mut theirs = |_: usize| {
        black_box(cu_run(j0));
        j0 += 1;
    };
    let r = t.compare(bytes, &mut [&mut ours, &mut theirs]);
    let (ours, theirs) = (r[0], r[1]);
    rows.push(Row {
        shape: format!("RLC w={W}"),
        op: format!("decode {losses} lost"),
        ours,
        refs: vec![("cu-fec", theirs)],
    });
}

/// The framework API end to end (what the QUIC layer calls): encode = add
/// every source and poll the repairs; decode = feed the received sources and
/// the repairs of a block with `lost` random losses among its sources.
fn framework_rows(t: &Timer, scheme: Scheme, k: usize, m: usize, lost: usize, rows: &mut Vec<Row>) {
    const NB: usize = 16;
    let mut rng = StdRng::seed_from_u64(7);
    let blocks = random_blocks(&mut rng, k * NB).remove(0);
    let pats = patterns(&mut rng, k, lost);
    let bytes = k * SIZE;
    let mut enc = scheme.encoder(SIZE).unwrap();
    let mut reps = Vec::new();
    let mut next = 0u64;
    let mut all_reps: Vec<Vec<qfec_erasure::RepairSymbol>> = Vec::new();
    for b in 0..NB {
        for j in 0..k {
            enc.add_source(next, &blocks[b * k + j]).unwrap();
            next += 1;
        }
        let mut r = Vec::new();
        enc.poll_repair(&mut r);
        assert_eq!(r.len(), m);
        all_reps.push(r);
    }
    let enc_mbs = t.measure(bytes, |i| {
        let b = i % NB;
        for j in 0..k {
            enc.add_source(next, &blocks[b * k + j]).unwrap();
            next += 1;
        }
        enc.poll_repair(&mut reps);
        for r in reps.drain(..) {
            enc.recycle(r);
        }
    });
    // Decoding: ids keep increasing; the block's first id is patched.
    let mut dec = scheme.decoder(SIZE, DecoderLimits::default()).unwrap();
    let mut rec = Vec::new();
    let mut run = |i: usize, verify: bool| {
        let b = i % NB;
        let base = (i * k) as u64;
        let lost = &pats[i % PATTERNS];
        for j in 0..k {
            if !lost[j] {
                dec.add_source(base + j as u64, &blocks[b * k + j], &mut rec)
                    .unwrap();
            }
        }
        for r in &all_reps[b] {
            let mut meta = r.meta().to_vec();
            meta[..8].copy_from_slice(&base.to_be_bytes());
            dec.add_repair(&meta, &r.payload, &mut rec).unwrap();
        }
        if verify {
            assert_eq!(rec.len(), lost.iter().filter(|&&l| l).count());
            for x in &rec {
                assert_eq!(x.data, blocks[b * k + (x.id - base) as usize]);
            }
        }
        rec.clear();
    };
    for i in 0..32 {
        run(i, true);
    }
    let mut i0 = 32;
    let dec_mbs = t.measure(bytes, |_| {
        run(i0, false);
        i0 += 1;
    });
    let shape = match scheme {
        Scheme::Xor { k, depth } => format!("API XOR {k}x{depth}"),
        Scheme::ReedSolomon { k, m } => format!("API RS {k},{m}"),
        _ => String::new(),
    };
    rows.push(Row {
        shape: shape.clone(),
        op: "encode".into(),
        ours: enc_mbs,
        refs: vec![],
    });
    rows.push(Row {
        shape,
        op: format!("decode {m} lost"),
        ours: dec_mbs,
        refs: vec![],
    });
}

/// Raw kernels (profiling aid): fused single output vs multi-output.
fn kernel_rows(t: &Timer, rows: &mut Vec<Row>) {
    use qfec_erasure::gf256::Kernel;
    let mut rng = StdRng::seed_from_u64(5);
    let srcs = random_blocks(&mut rng, 20).remove(0);
    let refs: Vec<&[u8]> = srcs.iter().map(|s| s.as_slice()).collect();
    let coefs: Vec<u8> = (0..200).map(|_| rng.gen_range(2..=255)).collect();
    let mut outs = vec![vec![0u8; SIZE]; 10];
    let k = Kernel::best();
    let multi = t.measure(20 * SIZE, |_| {
        for (r, o) in outs.iter_mut().enumerate() {
            k.mul_multi(o, &refs, &coefs[r * 20..(r + 1) * 20], false);
        }
        black_box(&outs);
    });
    let matrix = t.measure(20 * SIZE, |_| {
        let mut o: Vec<&mut [u8]> = outs.iter_mut().map(|o| o.as_mut_slice()).collect();
        k.mul_matrix(&mut o, &refs, &coefs);
        black_box(&o);
    });
    rows.push(Row {
        shape: "20x10 raw".into(),
        op: "matrix".into(),
        ours: matrix,
        refs: vec![("multi", multi)],
    });
}

fn main() {
    let quick = std::env::var("QFEC_BENCH_QUICK").is_ok_and(|v| v != "0")
        || std::env::args().any(|a| a == "--quick");
    let t = if quick {
        Timer {
            budget: Duration::from_millis(30),
            trials: 1,
        }
    } else {
        Timer {
            budget: Duration::from_millis(300),
            trials: 3,
        }
    };
    println!(
        "qfec-erasure codec bench: {SIZE}-byte symbols, kernel {:?}{}",
        qfec_erasure::gf256::Kernel::best(),
        if quick { " (quick)" } else { "" }
    );
    // QFEC_BENCH_FILTER=rs|rlc-repair|rlc-decode restricts the run (profiling).
    let filter = std::env::var("QFEC_BENCH_FILTER").unwrap_or_default();
    let want = |name: &str| filter.is_empty() || filter.split(',').any(|f| name.starts_with(f));
    let mut rows = Vec::new();
    if filter.contains("kern") {
        kernel_rows(&t, &mut rows);
    }
    for (k, m) in [(5, 1), (10, 2), (20, 10), (32, 4)] {
        if want(&format!("rs{k},{m}")) {
            rs_rows(&t, k, m, &mut rows);
        }
    }
    if want("api") {
        framework_rows(
            &t,
            Scheme::ReedSolomon { k: 20, m: 10 },
            20,
            10,
            10,
            &mut rows,
        );
        framework_rows(&t, Scheme::Xor { k: 10, depth: 1 }, 10, 1, 1, &mut rows);
    }
    for w in [5, 16] {
        if want(&format!("rlc-repair{w}")) {
            rlc_repair_rows(&t, w, &mut rows);
        }
    }
    for l in 1..=4 {
        if want(&format!("rlc-decode{l}")) {
            rlc_decode_rows(&t, l, &mut rows);
        }
    }
    println!(
        "| {:<12} | {:<14} | {:>10} | {:<10} | {:>10} | {:>6} | {:<10} | {:>10} | {:>6} |",
        "code", "operation", "ours MB/s", "ref", "ref MB/s", "ratio", "ref2", "ref2 MB/s", "ratio"
    );
    println!(
        "|{:-<14}|{:-<16}|{:-<12}|{:-<12}|{:-<12}|{:-<8}|{:-<12}|{:-<12}|{:-<8}|",
        "", "", "", "", "", "", "", "", ""
    );
    for r in &rows {
        let mut line = format!("| {:<12} | {:<14} | {:>10.0} |", r.shape, r.op, r.ours);
        for (name, v) in &r.refs {
            line += &format!(" {:<10} | {:>10.0} | {:>5.2}x |", name, v, r.ours / v);
        }
        for _ in r.refs.len()..2 {
            line += &format!(" {:<10} | {:>10} | {:>6} |", "", "", "");
        }
        println!("{line}");
    }
}
