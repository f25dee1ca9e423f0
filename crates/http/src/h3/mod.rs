//! HTTP/3 (RFC 9114) over qfec through the `h3` crate.
//!
//! [`Bridge`] implements h3's QUIC traits over one qfec connection; [`H3Client`] and
//! [`H3Server`] are the two ends of HTTP/3 as per-connection sessions that whoever owns the
//! connection polls: the CLI's socket loop and the lab's simulator alike. A traced connection
//! gets HTTP/3's events in its trace (qlog): stream types, frames created and parsed, SETTINGS. Grease is off, so
//! that a seed gives the same bytes (h3 draws grease values from a global RNG).

mod bridge;
mod client;
pub mod datagram;
mod server;
mod trace;

pub use bridge::{BidiStream, Bridge, QuicConnection, RecvStream, STREAM_BUFFER, SendStream};
pub use client::{H3Client, Response};
pub use server::H3Server;
pub use trace::{Field, H3Event};

use crate::tasks::Tasks;
use qfec_proto::{Connection, Instant};

/// The ALPN of HTTP/3.
pub const ALPN_H3: &[u8] = b"h3";

/// Rounds of pump and poll per call at most: each round either moves bytes or runs woken
/// tasks, so this only bounds a pathological ping-pong.
const MAX_ROUNDS: usize = 64;

/// Pumps the bridge and runs the tasks until neither has anything left to do.
fn drive(bridge: &mut Bridge, tasks: &mut Tasks, now: Instant, conn: &mut Connection) {
    for _ in 0..MAX_ROUNDS {
        let moved = bridge.pump(now, conn);
        let ran = tasks.run_once();
        if !moved && !ran {
            break;
        }
    }
}
