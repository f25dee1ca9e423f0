//! HTTP/3 between qfec's own client and server sessions in virtual time (the testkit's
//! simulated link): several concurrent requests over a lossy link arrive whole, a missing
//! path is a 404, and a seed gives the same bytes.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use qfec_http::RequestLog;
use qfec_http::content::Memory;
use qfec_http::h3::{H3Client, H3Server};
use qfec_proto::{ConnectionHandle, Event, StreamEvent, TransportConfig};
use qfec_testkit::{LinkSpec, Pair, payload};
use sha2::{Digest, Sha256};

struct Outcome {
    statuses: Vec<Option<u16>>,
    bodies: Vec<Vec<u8>>,
    errors: Vec<Option<String>>,
    log: Vec<RequestLog>,
    /// Datagrams each way.
    sent: [u64; 2],
}

/// Runs each server session on its connection, telling it which responses the client
/// acknowledged; collects the requests they logged.
fn poll_servers(
    p: &mut Pair,
    servers: &mut HashMap<ConnectionHandle, H3Server>,
    log: &mut Vec<RequestLog>,
) {
    for (h, s) in servers.iter_mut() {
        if let Some(c) = p.server.connection_mut(*h) {
            let mut acked = Vec::new();
            while let Some(ev) = c.poll() {
                if let Event::Stream(StreamEvent::Finished(id)) = ev {
                    acked.push(id.0);
                }
            }
            s.poll(p.now, c);
            s.on_acked(p.now, &acked, c.is_closed());
            log.extend(s.take_log());
        }
    }
}

fn run(seed: u64, loss: f64, files: &[(&str, usize)], ask: &[&str]) -> Outcome {
    let mut content = Memory::default();
    for (i, &(path, len)) in files.iter().enumerate() {
        content.insert(path, payload(len, i as u64));
    }
    let content = Rc::new(content);
    let link = LinkSpec {
        loss,
        ..LinkSpec::default()
    };
    let mut pair = Pair::new(seed, TransportConfig::default(), link.clone(), link);
    let ch = pair.connect(TransportConfig::default());
    let mut client = H3Client::new("localhost", ask.iter().map(|p| p.to_string()));
    let mut servers: HashMap<_, H3Server> = HashMap::new();
    let mut bodies = vec![Vec::new(); ask.len()];
    let mut log = Vec::new();
    let done = pair.run_until(Duration::from_secs(120), |p| {
        let now = p.now;
        while let Some(h) = p.server.accept() {
            servers.insert(h, H3Server::new(content.clone()));
        }
        poll_servers(p, &mut servers, &mut log);
        if let Some(c) = p.client.connection_mut(ch) {
            client.poll(now, c);
        }
        for (i, b) in bodies.iter_mut().enumerate() {
            for chunk in client.take_body(i) {
                b.extend_from_slice(&chunk);
            }
        }
        client.all_done()
    });
    assert!(done, "the requests did not end within 120 s");
    // The server logs a response once the client acknowledged it: a little longer.
    let expect = ask.len();
    pair.run_until(Duration::from_secs(5), |p| {
        poll_servers(p, &mut servers, &mut log);
        log.len() == expect
    });
    let rs = client.responses();
    Outcome {
        statuses: rs.iter().map(|r| r.status).collect(),
        errors: rs
            .iter()
            .map(|r| r.done.clone().and_then(|d| d.err()))
            .collect(),
        bodies,
        log,
        sent: pair.sent,
    }
}

#[test]
fn concurrent_requests_over_a_lossy_link_arrive_whole() {
    let files = [("/a.bin", 300_000), ("/b.bin", 1_000_000), ("/c.txt", 10)];
    let ask = ["/a.bin", "/b.bin", "/c.txt", "/missing", "/a.bin"];
    let o = run(1, 0.03, &files, &ask);
    assert_eq!(o.errors, vec![None; 5]);
    assert_eq!(
        o.statuses,
        vec![Some(200), Some(200), Some(200), Some(404), Some(200)]
    );
    for (i, path) in ask.iter().enumerate() {
        let want = match files.iter().position(|f| f.0 == *path) {
            Some(k) => payload(files[k].1, k as u64),
            None => Vec::new(),
        };
        assert_eq!(
            Sha256::digest(&o.bodies[i]),
            Sha256::digest(&want),
            "{path}"
        );
    }
    // The server logged each request with its status and the bytes it sent.
    let mut logged: Vec<(String, u16, u64)> = o
        .log
        .iter()
        .map(|l| (l.path.clone(), l.status, l.bytes))
        .collect();
    logged.sort();
    assert_eq!(
        logged,
        vec![
            ("/a.bin".into(), 200, 300_000),
            ("/a.bin".into(), 200, 300_000),
            ("/b.bin".into(), 200, 1_000_000),
            ("/c.txt".into(), 200, 10),
            ("/missing".into(), 404, 0),
        ]
    );
    assert!(o.log.iter().all(|l| l.method == "GET" && l.error.is_none()));
    // A response is logged when the client acknowledged it: the 1 MB one took round trips
    // over the 20 ms RTT, not the instant its bytes were queued.
    let big = o.log.iter().find(|l| l.path == "/b.bin").unwrap();
    assert!(
        big.finished.saturating_duration_since(big.started) > Duration::from_millis(40),
        "{big:?}"
    );
}

#[test]
fn the_same_seed_gives_the_same_exchange() {
    let files = [("/x", 200_000)];
    let a = run(7, 0.02, &files, &["/x", "/x"]);
    let b = run(7, 0.02, &files, &["/x", "/x"]);
    assert_eq!(a.sent, b.sent);
    assert_eq!(a.bodies, b.bodies);
    let times = |o: &Outcome| -> Vec<_> { o.log.iter().map(|l| (l.started, l.finished)).collect() };
    assert_eq!(times(&a), times(&b));
}
