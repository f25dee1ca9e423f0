//! The committed seeds still do what they were recorded for. A protocol change can make a
//! recorded session stop short (the server no longer accepts what the client said next), which
//! would quietly shrink the `server_endpoint` target's coverage to the handshake: regenerate
//! the seeds (`cargo +nightly run --manifest-path fuzz/Cargo.toml --example gen_seeds`) then.

use std::path::Path;

use qfec_fuzz::Server;

fn seed(target: &str, name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("seeds")
        .join(target)
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_recorded_session_reaches_one_rtt_stream_data() {
    let mut short_headers = 0;
    let server = Server::run(&seed("server_endpoint", "lab_session"), &mut |_, d| {
        // A short header (1-RTT packet) starts the datagram: form bit 0, fixed bit 1.
        short_headers += usize::from(d.first().is_some_and(|b| b & 0xc0 == 0x40));
    });
    assert!(
        server.bytes_read > 0,
        "the lab_session seed no longer reaches 1-RTT stream data: regenerate the seeds"
    );
    assert!(
        short_headers > 0,
        "the server sent no 1-RTT packet while replaying lab_session: regenerate the seeds"
    );
}

#[test]
fn the_client_initials_reach_the_handshake() {
    for name in ["client_initial", "sealed_client_hello"] {
        let mut sent = 0;
        Server::run(&seed("server_endpoint", name), &mut |_, _| sent += 1);
        assert!(sent > 0, "the server does not answer the {name} seed");
    }
}
