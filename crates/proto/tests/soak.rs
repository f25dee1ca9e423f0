//! Randomised soak: transfers in both directions over links with random loss, reordering,
//! rate and outages must deliver exactly the bytes sent. Each case is a seed; a failure
//! prints the conditions that reproduce it.

use std::time::Duration;

use proptest::prelude::*;
use qfec_proto::{ConnectionHandle, Dir, Event, ReadError, StreamId, TransportConfig, WriteError};
use qfec_testkit::{LinkSpec, Pair, payload};

fn link(
    loss: f64,
    jitter_ms: u64,
    rate_mbps: u64,
    delay_ms: u64,
    hole: Option<(u64, u64)>,
) -> LinkSpec {
    LinkSpec {
        delay: Duration::from_millis(delay_ms),
        loss,
        jitter: Duration::from_millis(jitter_ms),
        rate: rate_mbps * 1_000_000,
        blackholes: hole
            .map(|(start, len)| {
                vec![(
                    Duration::from_millis(start),
                    Duration::from_millis(start + len),
                )]
            })
            .unwrap_or_default(),
        drop_after: None,
        mtu: None,
    }
}

/// Client and server each send `len` bytes on one stream of their own (a bidirectional
/// stream opened by the client carries both directions), with several streams in flight.
struct Exchange {
    ch: ConnectionHandle,
    sh: Option<ConnectionHandle>,
    streams: usize,
    client: Vec<(StreamId, usize, bool, Vec<u8>, bool)>,
    server: Vec<(StreamId, usize, bool, Vec<u8>, bool)>,
}

fn pump(
    c: &mut qfec_proto::Connection,
    now: qfec_proto::Instant,
    data: &[u8],
    slots: &mut [(StreamId, usize, bool, Vec<u8>, bool)],
) {
    for (id, written, finished, got, eof) in slots.iter_mut() {
        while *written < data.len() {
            match c.write(*id, &data[*written..]) {
                Ok(n) => *written += n,
                Err(WriteError::Blocked) => break,
                Err(e) => panic!("write: {e:?}"),
            }
        }
        if *written == data.len() && !*finished {
            c.finish(*id).unwrap();
            *finished = true;
        }
        while !*eof {
            match c.read(now, *id, usize::MAX) {
                Ok(Some(b)) => got.extend_from_slice(&b),
                Ok(None) => *eof = true,
                Err(ReadError::Blocked) => break,
                Err(e) => panic!("read: {e:?}"),
            }
        }
    }
}

impl Exchange {
    fn drive(&mut self, p: &mut Pair, data: &[u8]) -> bool {
        let now = p.now;
        let c = p.client.connection_mut(self.ch).unwrap();
        while let Some(ev) = c.poll() {
            if let Event::ConnectionLost(e) = ev {
                panic!("client lost: {e}");
            }
        }
        if c.is_established() {
            while self.client.len() < self.streams {
                let Some(id) = c.open_stream(Dir::Bi) else {
                    break;
                };
                self.client.push((id, 0, false, Vec::new(), false));
            }
        }
        pump(c, now, data, &mut self.client);
        self.sh = self.sh.or(p.server.accept());
        if let Some(sh) = self.sh {
            let s = p.server.connection_mut(sh).unwrap();
            while let Some(ev) = s.poll() {
                if let Event::ConnectionLost(e) = ev {
                    panic!("server lost: {e}");
                }
            }
            while let Some(id) = s.accept_stream(Dir::Bi) {
                self.server.push((id, 0, false, Vec::new(), false));
            }
            pump(s, now, data, &mut self.server);
        }
        let done = |v: &[(StreamId, usize, bool, Vec<u8>, bool)]| {
            v.len() == self.streams && v.iter().all(|s| s.4 && s.3.len() == data.len())
        };
        done(&self.client) && done(&self.server)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn transfers_survive_hostile_links(
        seed in 0u64..1_000_000,
        loss_up in 0.0f64..0.15,
        loss_down in 0.0f64..0.15,
        jitter in 0u64..15,
        rate in 2u64..100,
        delay in 1u64..150,
        hole in proptest::option::of((100u64..3000, 100u64..2500)),
        streams in 1usize..4,
        len in 1usize..300_000,
    ) {
        let up = link(loss_up, jitter, rate, delay, hole);
        let down = link(loss_down, jitter, rate, delay, hole);
        let mut pair = Pair::new(seed, TransportConfig::default(), up, down);
        let ch = pair.connect(TransportConfig::default());
        let data = payload(len, seed);
        let mut ex = Exchange { ch, sh: None, streams, client: Vec::new(), server: Vec::new() };
        let ok = pair.run_until(Duration::from_secs(300), |p| ex.drive(p, &data));
        prop_assert!(ok, "not done in 300 s: client {:?} server {:?}",
            ex.client.iter().map(|s| (s.1, s.3.len(), s.4)).collect::<Vec<_>>(),
            ex.server.iter().map(|s| (s.1, s.3.len(), s.4)).collect::<Vec<_>>());
        for s in ex.client.iter().chain(&ex.server) {
            prop_assert!(s.3 == data, "bytes differ on stream {}", s.0);
        }
    }
}
