//! A whole `qfec_proto::Endpoint` acting as a server (DATAGRAM and FEC on, an echo
//! application) fed a sequence of datagrams in virtual time. The input format and the harness
//! are in `src/lib.rs`; seeds hold a client Initial, the same ClientHello as plaintext for the
//! harness to seal, and a recorded client session that replays to 1-RTT stream data.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    qfec_fuzz::Server::run(data, &mut |_, _| {});
});
