//! The framework API shared by block and window codes.

use std::fmt;

/// Errors of the erasure-coding framework. Every malformed, duplicate or
/// out-of-window input is reported with one of these, never with a panic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FecError {
    /// Invalid local configuration.
    InvalidConfig(&'static str),
    /// A source symbol longer than the symbol size, or a repair payload whose
    /// length is not the symbol size.
    SymbolSize,
    /// Repair metadata that does not parse or contradicts the local configuration.
    Malformed(&'static str),
    /// A symbol already received (or already recovered).
    Duplicate,
    /// A symbol older than what the decoder holds.
    OutOfWindow,
    /// Source ids given to an encoder must be contiguous and increasing.
    NonContiguous,
    /// More erasures than the code can repair (low-level codecs).
    TooManyErasures,
    /// The erasures meet a singular submatrix of a parity matrix given to
    /// [`crate::rs::ReedSolomon::with_parity`]: that matrix is not MDS.
    SingularMatrix,
}

impl fmt::Display for FecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FecError::InvalidConfig(s) => write!(f, "invalid FEC configuration: {s}"),
            FecError::SymbolSize => write!(f, "symbol size mismatch"),
            FecError::Malformed(s) => write!(f, "malformed repair metadata: {s}"),
            FecError::Duplicate => write!(f, "duplicate symbol"),
            FecError::OutOfWindow => write!(f, "symbol outside the decoding window"),
            FecError::NonContiguous => write!(f, "non-contiguous source symbol id"),
            FecError::TooManyErasures => write!(f, "too many erasures"),
            FecError::SingularMatrix => {
                write!(f, "singular decoding matrix: the parity matrix is not MDS")
            }
        }
    }
}

impl std::error::Error for FecError {}

/// Finite field of the RLC code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    /// GF(2): coefficients 0/1 (repair symbols are XORs).
    Gf2,
    /// GF(2^8) with polynomial 0x11D.
    Gf256,
}

/// The maximum length of encoded repair metadata.
pub const MAX_META: usize = 16;

/// A repair symbol produced by an encoder: scheme metadata (to be carried in
/// the REPAIR frame) and a payload of exactly the symbol size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepairSymbol {
    meta: [u8; MAX_META],
    meta_len: u8,
    /// The repair payload (symbol-size bytes).
    pub payload: Vec<u8>,
}

impl RepairSymbol {
    pub(crate) fn new(meta: &[u8], payload: Vec<u8>) -> Self {
        let mut m = [0u8; MAX_META];
        m[..meta.len()].copy_from_slice(meta);
        RepairSymbol {
            meta: m,
            meta_len: meta.len() as u8,
            payload,
        }
    }

    /// The encoded scheme metadata.
    pub fn meta(&self) -> &[u8] {
        &self.meta[..self.meta_len as usize]
    }
}

/// A source symbol recovered by a decoder (zero-padded to the symbol size).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovered {
    /// The source symbol id.
    pub id: u64,
    /// Its bytes, of the symbol size.
    pub data: Vec<u8>,
}

/// Encoder side of a FEC scheme.
pub trait FecEncoder: Send {
    /// Fixed symbol size of the session.
    fn symbol_size(&self) -> usize;
    /// Adds a source symbol; `data` shorter than the symbol size is zero-padded.
    /// Ids must be contiguous (the first one is free).
    fn add_source(&mut self, id: u64, data: &[u8]) -> Result<(), FecError>;
    /// Moves the repair symbols emitted so far into `out`.
    fn poll_repair(&mut self, out: &mut Vec<RepairSymbol>);
    /// Protects what has been added so far now: closes a partial block
    /// (block codes) or emits a repair symbol over the current window (RLC).
    fn flush(&mut self);
    /// Returns a payload buffer so that later repair symbols reuse it.
    fn recycle(&mut self, symbol: RepairSymbol);
}

/// Decoder side of a FEC scheme.
pub trait FecDecoder: Send {
    /// Fixed symbol size of the session.
    fn symbol_size(&self) -> usize;
    /// Feeds a received source symbol (zero-padded); it may complete a
    /// recovery, whose symbols are appended to `recovered`.
    fn add_source(
        &mut self,
        id: u64,
        data: &[u8],
        recovered: &mut Vec<Recovered>,
    ) -> Result<(), FecError>;
    /// Feeds a received repair symbol (metadata and payload); recovered
    /// source symbols are appended to `recovered`.
    fn add_repair(
        &mut self,
        meta: &[u8],
        payload: &[u8],
        recovered: &mut Vec<Recovered>,
    ) -> Result<(), FecError>;
}

/// Local limits of a decoder. They bound its memory; nothing a peer sends can
/// raise them.
///
/// Memory held, with `S` the symbol size and `span` rounded up to a power of
/// two: block codes `span * S` (sources) + `max(max_blocks, 2 * depth) * m * S`
/// (repairs); RLC `span * S` (sources) + at most `span` equations of
/// `S + span` bytes each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecoderLimits {
    /// Block codes: blocks held at once (the oldest is dropped first).
    pub max_blocks: usize,
    /// Source symbols held (block codes: 0 means `max_blocks * k * depth`;
    /// RLC: 0 means four times the window). RLC repair symbols must cover ids
    /// inside this span.
    pub max_span: usize,
}

impl Default for DecoderLimits {
    fn default() -> Self {
        DecoderLimits {
            max_blocks: 32,
            max_span: 0,
        }
    }
}

/// A FEC scheme and its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// XOR block code: one repair per block of `k` sources; `depth`
    /// interleaved blocks (source `i` of a group of `k * depth` goes to block
    /// `i % depth`).
    Xor {
        /// Sources per block (1..=255).
        k: u8,
        /// Interleaving depth (1..=1024).
        depth: u16,
    },
    /// Systematic Reed-Solomon (k, m), k + m <= 255.
    ReedSolomon {
        /// Sources per block.
        k: u8,
        /// Repair symbols per block.
        m: u8,
    },
    /// RFC 8681 sliding-window RLC.
    Rlc {
        /// Encoding window, in source symbols (1..=4095).
        window: u16,
        /// Density threshold DT (0..=15; 15 = every coefficient nonzero).
        density: u8,
        /// GF(2) or GF(2^8).
        field: Field,
        /// A repair burst every `interval` source symbols (>= 1).
        interval: u16,
        /// Repair symbols per burst (>= 1).
        repairs: u8,
    },
}

impl Scheme {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), FecError> {
        match *self {
            Scheme::Xor { k, depth } => {
                if k == 0 || depth == 0 || depth > 1024 {
                    return Err(FecError::InvalidConfig(
                        "XOR needs k >= 1, 1 <= depth <= 1024",
                    ));
                }
            }
            Scheme::ReedSolomon { k, m } => {
                if k == 0 || m == 0 || k as usize + m as usize > crate::rs::MAX_SYMBOLS {
                    return Err(FecError::InvalidConfig(
                        "RS needs k, m >= 1 and k + m <= 255",
                    ));
                }
            }
            Scheme::Rlc {
                window,
                density,
                interval,
                repairs,
                ..
            } => {
                if window == 0 || window > 4095 || density > 15 || interval == 0 || repairs == 0 {
                    return Err(FecError::InvalidConfig(
                        "RLC needs 1 <= window <= 4095, DT <= 15, interval >= 1, repairs >= 1",
                    ));
                }
            }
        }
        Ok(())
    }

    /// Length in bytes of this scheme's repair metadata.
    pub fn meta_len(&self) -> usize {
        match self {
            Scheme::Xor { .. } | Scheme::ReedSolomon { .. } => crate::block::BLOCK_META_LEN,
            Scheme::Rlc { .. } => crate::rlc::RLC_META_LEN,
        }
    }

    /// An encoder for this scheme with the given symbol size.
    pub fn encoder(&self, symbol_size: usize) -> Result<Box<dyn FecEncoder>, FecError> {
        self.validate()?;
        check_size(symbol_size)?;
        Ok(match *self {
            Scheme::Xor { k, depth } => Box::new(crate::block::BlockEncoder::xor(
                k as usize,
                depth as usize,
                symbol_size,
            )?),
            Scheme::ReedSolomon { k, m } => Box::new(crate::block::BlockEncoder::reed_solomon(
                k as usize,
                m as usize,
                symbol_size,
            )?),
            Scheme::Rlc { .. } => Box::new(crate::rlc::RlcEncoder::new(*self, symbol_size)?),
        })
    }

    /// A decoder for this scheme with the given symbol size and limits.
    pub fn decoder(
        &self,
        symbol_size: usize,
        limits: DecoderLimits,
    ) -> Result<Box<dyn FecDecoder>, FecError> {
        self.validate()?;
        check_size(symbol_size)?;
        Ok(match *self {
            Scheme::Xor { .. } | Scheme::ReedSolomon { .. } => {
                Box::new(crate::block::BlockDecoder::new(*self, symbol_size, limits)?)
            }
            Scheme::Rlc { .. } => {
                Box::new(crate::rlc::RlcDecoder::new(*self, symbol_size, limits)?)
            }
        })
    }
}

fn check_size(symbol_size: usize) -> Result<(), FecError> {
    if symbol_size == 0 || symbol_size > 65_535 {
        return Err(FecError::InvalidConfig("symbol size must be in 1..=65535"));
    }
    Ok(())
}

/// Copies `data` into `dst` and zero-pads the rest.
pub(crate) fn copy_padded(dst: &mut [u8], data: &[u8]) -> Result<(), FecError> {
    if data.len() > dst.len() {
        return Err(FecError::SymbolSize);
    }
    dst[..data.len()].copy_from_slice(data);
    dst[data.len()..].fill(0);
    Ok(())
}

/// A ring of source symbols keyed by id, holding at most `span` ids: those in
/// `[high + 1 - span, high]` where `high` is the highest id announced.
pub(crate) struct SourceStore {
    size: usize,
    span: usize,
    /// Slots: a power of two >= span (slot = id & mask).
    mask: u64,
    tags: Vec<u64>,
    data: Vec<u8>,
    /// One past the highest id announced (ids < `end` - span are gone).
    end: u64,
}

impl SourceStore {
    pub(crate) fn new(size: usize, span: usize) -> Self {
        let slots = span.next_power_of_two();
        SourceStore {
            size,
            span,
            mask: slots as u64 - 1,
            tags: vec![u64::MAX; slots],
            data: vec![0u8; slots * size],
            end: 0,
        }
    }

    /// Lowest id the store can hold.
    #[inline]
    pub(crate) fn low(&self) -> u64 {
        self.end.saturating_sub(self.span as u64)
    }

    /// One past the highest id announced.
    pub(crate) fn end(&self) -> u64 {
        self.end
    }

    /// Slides so that `id` is inside the store.
    #[inline]
    pub(crate) fn advance_to(&mut self, id: u64) {
        if id >= self.end {
            self.end = id.saturating_add(1);
        }
    }

    #[inline]
    pub(crate) fn contains(&self, id: u64) -> bool {
        id >= self.low() && id < self.end && self.tags[(id & self.mask) as usize] == id
    }

    #[inline]
    pub(crate) fn get(&self, id: u64) -> Option<&[u8]> {
        if self.contains(id) {
            let s = (id & self.mask) as usize;
            Some(&self.data[s * self.size..(s + 1) * self.size])
        } else {
            None
        }
    }

    /// Stores `data` (zero-padded) under `id`; the id must be >= `low()`
    /// after `advance_to(id)`.
    pub(crate) fn insert(&mut self, id: u64, data: &[u8]) -> Result<(), FecError> {
        if data.len() > self.size {
            return Err(FecError::SymbolSize);
        }
        self.advance_to(id);
        if id < self.low() {
            return Err(FecError::OutOfWindow);
        }
        if self.contains(id) {
            return Err(FecError::Duplicate);
        }
        let s = (id & self.mask) as usize;
        self.tags[s] = id;
        copy_padded(&mut self.data[s * self.size..(s + 1) * self.size], data)
    }
}

/// Checks a source symbol handed to an encoder: it fits the symbol size and continues the
/// contiguous ids. Returns the id expected next.
pub(crate) fn next_source_id(
    size: usize,
    next_id: Option<u64>,
    id: u64,
    data: &[u8],
) -> Result<u64, FecError> {
    if data.len() > size {
        return Err(FecError::SymbolSize);
    }
    if next_id.is_some_and(|n| id != n) {
        return Err(FecError::NonContiguous);
    }
    id.checked_add(1).ok_or(FecError::NonContiguous)
}

/// Checks a source symbol handed to a decoder: it fits the symbol size and is not older than
/// what the decoder still holds.
pub(crate) fn check_received_source(
    size: usize,
    low: u64,
    id: u64,
    data: &[u8],
) -> Result<(), FecError> {
    if data.len() > size {
        return Err(FecError::SymbolSize);
    }
    if id < low {
        return Err(FecError::OutOfWindow);
    }
    Ok(())
}
