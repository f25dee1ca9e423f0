//! Traces of lossy transfers in virtual time: every event passes the schema check, both
//! vantage points are there, packets the link dropped appear as `packet_lost`, and FEC's
//! events match its counters.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use qfec_fec::{FecConfig, FecExtension};
use qfec_proto::{Instant, TransportConfig};
use qfec_qlog::validate::{QlogFile, validate};
use qfec_qlog::{QlogFactory, QlogOptions};
use qfec_testkit::{Exchange, LinkSpec, Pair, payload};
use serde_json::Value;

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("qfec-qlog-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn traced(mut t: TransportConfig, f: &Arc<QlogFactory>) -> TransportConfig {
    t.events = Some(f.clone());
    t
}

/// The client's and the server's files of the one connection in `dir`.
fn both(dir: &PathBuf) -> (QlogFile, QlogFile) {
    let mut client = None;
    let mut server = None;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("endpoint_") {
            continue;
        }
        let f = validate(&std::fs::read(&p).unwrap()).unwrap_or_else(|e| panic!("{name}: {e}"));
        // <odcid>_<vantage>.sqlog, the odcid also the trace's group id.
        let (odcid, vantage) = name.trim_end_matches(".sqlog").split_once('_').unwrap();
        assert_eq!(f.vantage(), Some(vantage));
        assert_eq!(
            f.header.pointer("/trace/common_fields/group_id"),
            Some(&Value::from(odcid))
        );
        match vantage {
            "client" => client = Some(f),
            "server" => server = Some(f),
            v => panic!("vantage {v}"),
        }
    }
    (client.expect("client file"), server.expect("server file"))
}

fn one_rtt_pns<'a>(f: &'a QlogFile, name: &'a str) -> impl Iterator<Item = u64> + 'a {
    f.named(name).filter_map(|e| {
        let h = e.pointer("/data/header")?;
        (h.get("packet_type")? == "1RTT").then(|| h.get("packet_number")?.as_u64())?
    })
}

#[test]
fn a_lossy_transfer_traces_every_drop_as_a_lost_packet() {
    let dir = temp_dir("lossy");
    let factory = Arc::new(QlogFactory::new(QlogOptions::new(&dir)).unwrap());
    let t = traced(TransportConfig::default(), &factory);
    let mut pair = Pair::new(7, t.clone(), LinkSpec::default(), LinkSpec::default());
    // Drop some of the server's 1-RTT datagrams in the middle of the transfer; the link
    // neither reorders nor delays, so no loss is spurious.
    let dropped = Arc::new(Mutex::new(0u64));
    let d = dropped.clone();
    pair.drop_hook = Some(Box::new(move |g| {
        let drop = !g.to_server && g.is_short() && g.index > 30 && g.index % 17 == 0;
        if drop {
            *d.lock().unwrap() += 1;
        }
        drop
    }));
    let ch = pair.connect(t);
    let mut x = Exchange::new(ch, Vec::new(), payload(600_000, 1));
    assert!(x.run(&mut pair, Duration::from_secs(30)), "{:?}", x.error);
    let stats = pair.server.connection(x.server.unwrap()).unwrap().stats();
    drop(pair);
    factory.flush();
    assert!(factory.error().is_none(), "{:?}", factory.error());

    let (client, server) = both(&dir);
    let dropped = *dropped.lock().unwrap();
    assert!(dropped >= 10, "{dropped} drops");
    let lost: BTreeSet<u64> = one_rtt_pns(&server, "quic:packet_lost").collect();
    let sent: BTreeSet<u64> = one_rtt_pns(&server, "quic:packet_sent").collect();
    let received: BTreeSet<u64> = one_rtt_pns(&client, "quic:packet_received").collect();
    // Every packet declared lost was sent and never arrived, and every drop was declared.
    assert_eq!(lost.len() as u64, dropped);
    assert!(lost.is_subset(&sent));
    assert!(lost.is_disjoint(&received));
    assert_eq!(stats.packets_lost, dropped);
    assert_eq!(stats.spurious_losses, 0);
    // The rest of the story is there too.
    for name in [
        "quic:version_information",
        "quic:parameters_set",
        "quic:key_updated",
        "quic:connection_state_updated",
        "quic:recovery_metrics_updated",
        "quic:congestion_state_updated",
        "quic:packets_acked",
    ] {
        assert!(server.named(name).count() > 0, "server has no {name}");
        assert!(client.named(name).count() > 0, "client has no {name}");
    }
    assert_eq!(server.named("quic:parameters_set").count(), 2);
    let states: Vec<&str> = client
        .named("quic:connection_state_updated")
        .filter_map(|e| e.pointer("/data/new")?.as_str())
        .collect();
    assert_eq!(
        states,
        [
            "attempted",
            "handshake_started",
            "handshake_complete",
            "handshake_confirmed"
        ]
    );
    // Times are the virtual clock's, in milliseconds, and never go back.
    let times: Vec<f64> = server
        .events
        .iter()
        .map(|e| e["time"].as_f64().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
    assert!(times[0] >= 1000.0, "the test pair's clock starts at 1 s");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn fec_events_match_its_counters() {
    let dir = temp_dir("fec");
    let mut options = QlogOptions::new(&dir);
    options
        .extra_schemas
        .push(qfec_fec::events::QLOG_SCHEMA.into());
    let factory = Arc::new(QlogFactory::new(options).unwrap());
    let mut server_t = TransportConfig::default();
    FecConfig::new("rlc".parse().ok()).install(&mut server_t);
    let mut client_t = TransportConfig::default();
    FecConfig::new(None).install(&mut client_t);
    let loss = LinkSpec {
        loss: 0.03,
        ..LinkSpec::default()
    };
    let server_t = traced(server_t, &factory);
    let mut pair = Pair::new(11, server_t, loss.clone(), loss);
    let ch = pair.connect(traced(client_t, &factory));
    let mut x = Exchange::new(ch, Vec::new(), payload(400_000, 2));
    assert!(x.run(&mut pair, Duration::from_secs(60)), "{:?}", x.error);
    let fec = |ep: &qfec_proto::Endpoint, h| {
        ep.connection(h)
            .unwrap()
            .extension::<FecExtension>()
            .unwrap()
            .stats()
    };
    let s = fec(&pair.server, x.server.unwrap());
    let c = fec(&pair.client, ch);
    drop(pair);
    let (client, server) = both(&dir);
    assert!(
        server.header["trace"]["event_schemas"]
            .as_array()
            .unwrap()
            .contains(&Value::from(qfec_fec::events::QLOG_SCHEMA))
    );
    let count = |f: &QlogFile, n| f.named(n).count() as u64;
    assert!(s.repair_symbols_sent > 0 && c.symbols_recovered > 0);
    assert_eq!(
        count(&server, "fec:source_protected"),
        s.source_symbols_sent
    );
    assert_eq!(count(&server, "fec:repair_sent"), s.repair_symbols_sent);
    assert_eq!(count(&client, "fec:symbol_recovered"), c.symbols_recovered);
    assert_eq!(count(&server, "fec:scheme_changed"), 1);
    // FEC frames show as unknown frames with their type.
    assert!(server.named("quic:packet_sent").any(|e| {
        e["data"]["frames"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["frame_type"] == "unknown" && f["frame_type_bytes"].is_u64())
    }));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn multipath_packets_carry_their_path_as_the_tuple() {
    let dir = temp_dir("multipath");
    let factory = Arc::new(QlogFactory::new(QlogOptions::new(&dir)).unwrap());
    let t = traced(
        TransportConfig {
            multipath: Some(qfec_proto::MultipathConfig::default()),
            ..TransportConfig::default()
        },
        &factory,
    );
    let mut pair = Pair::new(8, t.clone(), LinkSpec::default(), LinkSpec::default());
    let second = "10.0.1.1:5001".parse().unwrap();
    pair.add_path(second, LinkSpec::default(), LinkSpec::default());
    let ch = pair.connect(t);
    assert!(pair.run_until(Duration::from_secs(5), |p| {
        p.client.connection(ch).unwrap().handshake_confirmed()
    }));
    let (now, server) = (pair.now, pair.server_addr);
    let c = pair.client.connection_mut(ch).unwrap();
    c.open_path(now, Some(second), server).unwrap();
    let mut x = Exchange::new(ch, Vec::new(), payload(400_000, 2));
    assert!(x.run(&mut pair, Duration::from_secs(30)), "{:?}", x.error);
    drop(pair);
    factory.flush();
    assert!(factory.error().is_none(), "{:?}", factory.error());
    let (client, server) = both(&dir);
    for f in [&client, &server] {
        let tuples: BTreeSet<&str> = f
            .named("quic:packet_sent")
            .filter(|e| e.pointer("/data/header/packet_type") == Some(&Value::from("1RTT")))
            .filter_map(|e| e.get("tuple")?.as_str())
            .collect();
        assert_eq!(
            tuples,
            BTreeSet::from(["0", "1"]),
            "1-RTT packets on both paths"
        );
        // Long-header packets belong to no path of the multipath extension.
        assert!(
            f.named("quic:packet_sent")
                .filter(|e| e.pointer("/data/header/packet_type") == Some(&Value::from("initial")))
                .all(|e| e.get("tuple").is_none())
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A process killed mid-connection (a test harness stopping a server, a batch scheduler's
/// time limit) keeps its trace up to the last second: a connection's file is flushed at its
/// first event a second after the last flush, not only when the connection closes.
#[test]
fn a_live_connection_file_is_at_most_a_second_behind() {
    let dir = temp_dir("live");
    let factory = Arc::new(QlogFactory::new(QlogOptions::new(&dir)).unwrap());
    let t = traced(TransportConfig::default(), &factory);
    // 200 kb/s: the 150 kB download lasts six seconds, and its first three fill less than
    // the files' 64 kB buffers.
    let slow = LinkSpec {
        rate: 200_000,
        ..LinkSpec::default()
    };
    let mut pair = Pair::new(3, t.clone(), slow.clone(), slow);
    let ch = pair.connect(t);
    let (_, done, _) = pair.download(ch, &payload(150_000, 2), Duration::from_secs(3));
    assert!(!done, "the download still runs");
    // The connections are alive (nothing dropped or closed): what is on disk now is what a
    // killed process would leave.
    // Trace times count from the clock's origin, as the pair's clock does.
    let now_ms = pair
        .now
        .saturating_duration_since(Instant::from_nanos(0))
        .as_secs_f64()
        * 1e3;
    let mut files = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let f = validate(&std::fs::read(&p).unwrap()).unwrap_or_else(|e| panic!("{p:?}: {e}"));
        let last = f
            .events
            .iter()
            .filter_map(|e| e.get("time")?.as_f64())
            .fold(0.0, f64::max);
        assert!(
            last >= now_ms - 1100.0,
            "{p:?}: last event on disk at {last} ms, the clock at {now_ms} ms"
        );
        files += 1;
    }
    assert_eq!(files, 2, "the client's and the server's files");
    drop(pair);
    std::fs::remove_dir_all(&dir).unwrap();
}
