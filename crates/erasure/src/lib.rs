//! # qfec-erasure
//!
//! Pure erasure coding for qfec (no QUIC dependency): GF(2^8) arithmetic with
//! run-time selected SIMD kernels, an interleaved XOR block code, a systematic
//! Reed-Solomon (MDS) block code and RFC 8681 sliding-window random linear
//! codes over GF(2^8) and GF(2) (with RFC 8682 TinyMT32).
//!
//! ## Framework API
//!
//! One API serves block and window codes ([`Scheme`], [`FecEncoder`],
//! [`FecDecoder`]):
//!
//! ```
//! use qfec_erasure::{DecoderLimits, Scheme};
//!
//! let scheme = Scheme::ReedSolomon { k: 4, m: 2 };
//! let mut enc = scheme.encoder(100).unwrap();
//! let mut dec = scheme.decoder(100, DecoderLimits::default()).unwrap();
//! let mut repairs = Vec::new();
//! let mut recovered = Vec::new();
//! for id in 0..4u64 {
//!     let data = vec![id as u8; 60]; // shorter than 100: zero-padded
//!     enc.add_source(id, &data).unwrap();
//!     if id != 1 && id != 2 {
//!         dec.add_source(id, &data, &mut recovered).unwrap();
//!     }
//! }
//! enc.poll_repair(&mut repairs);
//! for r in &repairs {
//!     dec.add_repair(r.meta(), &r.payload, &mut recovered).unwrap();
//! }
//! let ids: Vec<u64> = recovered.iter().map(|r| r.id).collect();
//! assert_eq!(ids, vec![1, 2]);
//! assert_eq!(&recovered[0].data[..60], &[1u8; 60][..]);
//! ```
//!
//! - Source symbols have ids (`u64`, contiguous at the encoder) and a fixed
//!   symbol size per session; shorter data is zero-padded (QUIC PADDING).
//! - Each [`RepairSymbol`] carries scheme metadata ([`RepairSymbol::meta`],
//!   for the REPAIR frame) and a payload. Metadata formats:
//!   [`block::BlockMeta`] (XOR: first id, stride, count; RS: first id, k, m,
//!   repair index) and [`rlc::RlcMeta`] (RFC 8681 Repair FEC Payload ID:
//!   repair key, DT, NSS, ESI).
//! - Decoders reject malformed, duplicate and out-of-window symbols with a
//!   [`FecError`] and bound their memory by [`DecoderLimits`] (local
//!   configuration only).
//!
//! Low-level codecs are public as well: [`rs::ReedSolomon`],
//! [`gf256::Kernel`] (`dst ^= c * src` and the fused multi-source variant),
//! [`rlc::generate_coding_coefficients`] and [`tinymt::TinyMt32`].

#![warn(missing_docs)]
// Unsafe code is confined to the SIMD kernels and their dispatch.
#![deny(unsafe_code)]

pub mod api;
pub mod block;
pub mod gf256;
pub mod rlc;
pub mod rs;
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod simd_x86;
pub mod tinymt;

pub use api::{
    DecoderLimits, FecDecoder, FecEncoder, FecError, Field, Recovered, RepairSymbol, Scheme,
};
pub use block::{BlockDecoder, BlockEncoder};
pub use rlc::{RlcDecoder, RlcEncoder};
pub use rs::ReedSolomon;
