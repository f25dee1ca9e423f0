//! The lab over an 802.11n WLAN: the `wlan-n` preset with real QUIC, and `[link.wifi]` in
//! scenario files.

use std::path::Path;
use std::time::Duration;

use qfec_lab::presets::{client_addr, server_addr};
use qfec_lab::{LinkPair, Preset, ProtocolSettings, RunSpec, Scenario, Workload, quic};
use qfec_sim::nodes::{CbrSender, Sink};
use qfec_sim::wifi::{Band, ChannelWidth};
use qfec_sim::{Instant, LossSpec, QueueLimit, Serializer, Simulator};

fn spec(links: LinkPair, bytes: u64, protocol: ProtocolSettings, seed: u64) -> RunSpec {
    RunSpec {
        index: 0,
        scenario: "wifi".into(),
        preset: Some("wlan-n".into()),
        variant: "default".into(),
        loss: 0.0,
        seed,
        links,
        workload: Workload::Bulk { bytes },
        protocol,
        duration_limit: Duration::from_secs(60),
        flows: Vec::new(),
        extra_paths: Vec::new(),
        rebindings: Vec::new(),
    }
}

/// UDP payload throughput of a sender far above capacity (1452-byte datagrams, 116 Mb/s)
/// through the preset's downlink, with nothing on the uplink: the queue is full within
/// milliseconds, so two seconds give the steady rate.
fn saturated_udp(links: &LinkPair) -> f64 {
    let mut sim: Simulator = Simulator::new(1);
    let (s, c) = (server_addr(), client_addr());
    sim.add_node(
        s,
        Box::new(CbrSender::new(c, 1452, Duration::from_micros(100), 20_000)),
    );
    sim.add_node(c, Box::new(Sink::default()));
    let (down, _) = links.install(&mut sim, s, c);
    sim.run_until(Instant::from_nanos(2_000_000_000));
    sim.link_stats(down).delivered_bytes as f64 * 8.0 / 2.0
}

#[test]
fn quic_bulk_over_wlan_n_pays_for_its_acks() {
    let p = Preset::from_name("wlan-n").unwrap();
    let links = p.links(Some(0.0));
    let udp = saturated_udp(&links);
    let t0 = std::time::Instant::now();
    let rec = quic::run(&spec(links, 2_000_000, ProtocolSettings::default(), 1));
    let wall = t0.elapsed().as_secs_f64();
    assert!(rec.error.is_none(), "{:?}", rec.error);
    assert!(rec.completed);
    assert_eq!(rec.app_bytes, 2_000_000);
    let goodput = rec.goodput_bps.unwrap();
    let w = rec.wlan.clone().expect("a WLAN record");
    println!(
        "wlan-n: saturated UDP {:.1} Mb/s; QUIC 2 MB goodput {:.1} Mb/s in {:.3} s; down: {} accesses, {:.1} MPDUs each, {:.3} s air; up (ACKs): {} accesses, {:.1} MPDUs each, {:.3} s air, {} collisions; channel busy {:.0} %; {} events, {wall:.2} s wall",
        udp / 1e6,
        goodput / 1e6,
        rec.completion_time_s.unwrap(),
        w.down.txops,
        w.down.mean_ampdu,
        w.down.airtime_s,
        w.up.txops,
        w.up.mean_ampdu,
        w.up.airtime_s,
        w.up.collisions + w.down.collisions,
        w.busy_fraction * 100.0,
        rec.sim_events,
    );
    // The PHY is 65 Mb/s; full A-MPDUs of UDP reach about 60.
    assert!((55e6..65e6).contains(&udp), "{udp}");
    // The client's ACKs are channel accesses of their own, with air time.
    assert!(w.up.txops > 20, "{}", w.up.txops);
    assert!(w.up.airtime_s > 0.0);
    assert!(w.up.mpdus_sent >= w.up.txops);
    // ... which the download pays for (with its handshake and slow start on top).
    assert!(goodput < 0.9 * udp, "{goodput} vs {udp}");
    assert!(goodput > 10e6, "{goodput}");
    // Without MPDU errors nothing is retransmitted by the MAC but after collisions.
    assert_eq!(w.down.mpdus_dropped + w.up.mpdus_dropped, 0);

    // Same seed, same run.
    let again = quic::run(&spec(
        p.links(Some(0.0)),
        2_000_000,
        ProtocolSettings::default(),
        1,
    ));
    assert_eq!(again.event_hash, rec.event_hash);
}

#[test]
fn fewer_acks_leave_more_air_for_the_download() {
    // Paper 001's lever, on its 10 MB transfer: fewer ACKs, less uplink air time, more
    // goodput. The client's ACKs pile up while the access point holds the channel and leave
    // in one A-MPDU, so the uplink's accesses hardly change; its MPDUs and air time do.
    let p = Preset::from_name("wlan-n").unwrap();
    let run = |threshold: u32| {
        let protocol = ProtocolSettings {
            ack_eliciting_threshold: Some(threshold),
            ..ProtocolSettings::default()
        };
        let rec = quic::run(&spec(p.links(Some(0.0)), 10_000_000, protocol, 2));
        assert!(rec.error.is_none(), "{:?}", rec.error);
        let w = rec.wlan.unwrap();
        println!(
            "ACK every {threshold:2} packets: {:.1} Mb/s; uplink {} accesses, {} MPDUs, {:.3} s of air",
            rec.goodput_bps.unwrap() / 1e6,
            w.up.txops,
            w.up.mpdus_sent,
            w.up.airtime_s
        );
        (rec.goodput_bps.unwrap(), w.up)
    };
    let (g1, up1) = run(1);
    let (g2, up2) = run(2);
    let (g10, up10) = run(10);
    assert!(up10.mpdus_sent * 3 < up2.mpdus_sent && up2.mpdus_sent < up1.mpdus_sent);
    assert!(up10.airtime_s < up2.airtime_s && up2.airtime_s < up1.airtime_s);
    assert!(g1 < g2 && g2 < g10, "{g1} {g2} {g10}");
}

fn parse(text: &str) -> Result<Scenario, String> {
    Scenario::from_toml(text, "s.toml", Path::new(".")).map_err(|e| e.to_string())
}

const BULK: &str = "[workload]\nkind = \"bulk\"\nsize = \"1MB\"\n";

fn station(d: &qfec_sim::LinkSpec) -> &qfec_sim::wifi::WifiStation {
    match &d.serializer {
        Serializer::Wifi(st) => st,
        other => panic!("not a WLAN station: {other:?}"),
    }
}

#[test]
fn scenario_wifi_table() {
    // The preset alone.
    let s = parse(&format!("preset = \"wlan-n\"\n{BULK}")).unwrap();
    assert_eq!(s.loss, Some(0.05));
    assert_eq!(station(&s.links.down).phy.mcs(), 7);
    assert_eq!(s.links.down.queue, QueueLimit::Packets(1000));
    // Overrides over the preset; the top-level loss is the MPDU error rate.
    let s = parse(&format!(
        "preset = \"wlan-n\"\nloss = \"1%\"\n[link.wifi]\nmcs = 15\nwidth_mhz = 40\nshort_gi = true\nband = \"5ghz\"\naggregation = {{ max_mpdus = 16 }}\nap_queue = \"200 packets\"\nclient_queue = \"64KB\"\nwired_delay = \"1ms\"\n[link.down]\nloss = {{ model = \"bernoulli\", p = 0.001 }}\n{BULK}"
    ))
    .unwrap();
    assert_eq!(s.loss, Some(0.01));
    let (d, u) = (station(&s.links.down), station(&s.links.up));
    assert_eq!(d.phy.mcs(), 15);
    assert_eq!(d.phy.width(), ChannelWidth::Mhz40);
    assert!(d.phy.short_gi());
    assert_eq!(d.channel.band, Band::Ghz5);
    assert_eq!(d.aggregation.unwrap().max_mpdus, 16);
    assert_eq!(d.aggregation.unwrap().max_bytes, 65_535);
    assert!(matches!(u.mpdu_error, LossSpec::Bernoulli { p } if p == 0.01));
    assert_eq!(s.links.down.queue, QueueLimit::Packets(200));
    assert_eq!(s.links.up.queue, QueueLimit::Bytes(64_000));
    assert_eq!(s.links.up.delay, Duration::from_millis(1));
    // [link.down] still adds its stages after the medium.
    assert_eq!(s.links.down.air_loss.len(), 1);
    assert!(s.links.up.air_loss.is_empty());
    // Without a preset: paper 001's WLAN, no wired delay, no errors; aggregation off.
    let s = parse(&format!(
        "[link.wifi]\naggregation = \"off\"\nretry_limit = 2\n{BULK}"
    ))
    .unwrap();
    let d = station(&s.links.down);
    assert!(d.aggregation.is_none());
    assert_eq!(d.retry_limit, 2);
    assert!(matches!(d.mpdu_error, LossSpec::None));
    assert_eq!(s.links.down.delay, Duration::ZERO);
    // A sweep over losses sets the MPDU error rate, not an air loss.
    let mut sweep = qfec_lab::Sweep::new(s);
    sweep.losses = vec![0.2];
    let runs = sweep.runs().unwrap();
    assert!(matches!(station(&runs[0].links.up).mpdu_error, LossSpec::Bernoulli { p } if p == 0.2));
    assert!(runs[0].links.up.air_loss.is_empty());
}

#[test]
fn scenario_wifi_errors_say_what_and_how() {
    let cases = [
        (
            "[link.wifi]\nmcs = 40\n",
            "link.wifi.mcs: 40 is not an 802.11n MCS: use 0-31",
        ),
        (
            "[link.wifi]\nwidth_mhz = 80\n",
            "link.wifi.width_mhz: 802.11n channels are 20 or 40 MHz wide, got 80",
        ),
        (
            "[link.wifi]\nband = \"6ghz\"\n",
            "link.wifi.band: unknown variant `6ghz`, expected `5ghz` or `2.4ghz`",
        ),
        (
            "[link.wifi]\naggregation = \"maybe\"\n",
            "link.wifi.aggregation: expected \"on\", \"off\" or a table of limits",
        ),
        (
            "[link.wifi]\naggregation = { max_mpdus = 100 }\n",
            "link.wifi.aggregation.max_mpdus: 100 MPDUs: use 1-64",
        ),
        (
            "[link.wifi]\naggregation = { max_bytes = \"100KB\" }\n",
            "link.wifi.aggregation.max_bytes: 100000 bytes: use 70-65535",
        ),
        (
            "[link.wifi]\naggregation = { max_ppdu = \"10ms\" }\n",
            "link.wifi.aggregation.max_ppdu: 10ms: use a positive duration up to 5.484ms",
        ),
        (
            "[link.wifi]\naggregation = { mpdus = 4 }\n",
            "link.wifi.aggregation.mpdus: unknown field `mpdus`",
        ),
        (
            "[link.wifi]\nmpdu_error = 1.0\n",
            "link.wifi.mpdu_error: must be below 100%",
        ),
        (
            "[link.wifi]\nretry_limit = 1000\n",
            "link.wifi.retry_limit: 1000 retries: use 0-255",
        ),
        (
            "[link.wifi]\nap_queue = \"bdp\"\n",
            "link.wifi.ap_queue: a WLAN's rate varies with contention",
        ),
        (
            "[link.wifi]\nrate = \"10Mbps\"\n",
            "link.wifi.rate: unknown field `rate`",
        ),
        (
            "preset = \"wlan-n\"\nloss = \"1%\"\n[link.wifi]\nmpdu_error = 0.02\n",
            "link.wifi.mpdu_error: the top-level loss is the MPDU error rate with [link.wifi]: give one of them",
        ),
        (
            "loss = \"1%\"\n[link.wifi]\n",
            "loss: a top-level loss needs a preset; set link.wifi.mpdu_error instead",
        ),
        (
            "preset = \"wlan-n\"\n[link.down]\nrate = \"10Mbps\"\n",
            "link.down.rate: the WLAN ([link.wifi] or the preset) sets this direction's rate",
        ),
        (
            "preset = \"wlan-n\"\n[link.up]\nqueue = \"bdp\"\n",
            "link.up.queue: a WLAN station's queue is a number of packets or bytes",
        ),
        (
            "[link.wifi]\n[link.down]\nschedule = [{ at = \"1s\", rate = \"1Mbps\" }]\n",
            "link.down.schedule[0].rate: a WLAN station's rate is its PHY rate",
        ),
    ];
    for (text, want) in cases {
        let e = parse(&format!("{text}{BULK}")).expect_err(text);
        assert!(e.contains(want), "{text:?}\n got: {e}\nwant: {want}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
}
