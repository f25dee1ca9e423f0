//! FEC's own CPU cost in the protocol core, without sockets: a bulk download between two
//! qfec-proto endpoints in one thread over the testkit's virtual link (10 Gb/s, 1 ms RTT, no
//! loss), plain QUIC against the same with FEC on (RLC, one repair per ten source symbols
//! over a window of 20, as the loopback bench sends), alternating, medians and their ratio.
//! Both endpoints' work is on one core, so the ratio is CPU per delivered byte. With FEC the
//! packets are 10 % more (the repair symbols), so the ratio cannot exceed about 0.91.
//!
//! `cargo bench -p qfec-fec --bench cost` (QFEC_BENCH_MB=32 QFEC_BENCH_RUNS=9 to change;
//! QFEC_BENCH_FEC sets the FEC scheme; QFEC_BENCH_ONLY=plain or fec runs one side, for a
//! profiler).

use std::time::{Duration, Instant as StdInstant};

use qfec_fec::FecConfig;
use qfec_proto::TransportConfig;
use qfec_testkit::{LinkSpec, Pair, payload};

fn transport(fec: Option<&str>, server: bool, mb: u64) -> TransportConfig {
    let mut t = TransportConfig {
        receive_window: 64 << 20,
        max_receive_window: 64 << 20,
        stream_receive_window: 64 << 20,
        max_stream_receive_window: 64 << 20,
        send_buffer: (mb + 1) << 20,
        connection_send_buffer: (mb + 1) << 20,
        ..TransportConfig::default()
    };
    if let Some(f) = fec {
        let send = qfec_fec::parse_fec(f).expect("QFEC_BENCH_FEC");
        FecConfig::new(send.filter(|_| server)).install(&mut t);
    }
    t
}

/// One download of `data`: the wall time from the connection attempt to the last byte read.
fn run(data: &[u8], fec: Option<&str>) -> Duration {
    let mb = data.len() as u64 >> 20;
    let link = LinkSpec {
        delay: Duration::from_micros(500),
        rate: 10_000_000_000,
        ..LinkSpec::default()
    };
    let mut pair = Pair::new(1, transport(fec, true, mb), link.clone(), link);
    // Batches of datagrams per poll, as segmentation offload sends them.
    pair.batch = 10;
    let start = StdInstant::now();
    let ch = pair.connect(transport(fec, false, mb));
    let (_, done, got) = pair.download(ch, data, Duration::from_secs(600));
    let elapsed = start.elapsed();
    assert!(done && got == data, "download incomplete or corrupt");
    elapsed
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let mb = env_usize("QFEC_BENCH_MB", 32).max(1);
    let runs = env_usize("QFEC_BENCH_RUNS", 9).max(1);
    let fec = std::env::var("QFEC_BENCH_FEC").unwrap_or_else(|_| "rlc(20,10)".into());
    let only = std::env::var("QFEC_BENCH_ONLY").unwrap_or_default();
    let data = payload(mb << 20, 7);
    println!(
        "bulk download in memory (one thread, both endpoints), {mb} MB, {runs} alternating runs each"
    );
    let gbps = |d: Duration| (data.len() * 8) as f64 / d.as_secs_f64() / 1e9;
    let (mut plain, mut coded) = (Vec::new(), Vec::new());
    for i in 0..runs {
        let p = (only != "fec").then(|| gbps(run(&data, None)));
        let f = (only != "plain").then(|| gbps(run(&data, Some(&fec))));
        plain.extend(p);
        coded.extend(f);
        println!(
            "run {}: plain {:.2} Gb/s   {fec} {:.2} Gb/s",
            i + 1,
            p.unwrap_or(f64::NAN),
            f.unwrap_or(f64::NAN)
        );
    }
    if plain.is_empty() || coded.is_empty() {
        return;
    }
    let (mp, mf) = (median(&mut plain), median(&mut coded));
    println!(
        "median: plain {mp:.2} Gb/s   {fec} {mf:.2} Gb/s   fec/plain {:.3}",
        mf / mp
    );
}
