//! Block codes (interleaved XOR and Reed-Solomon) behind the framework API.
//!
//! A block is the set of source ids `first + i * stride`, `i < count`
//! (`stride` is the interleaving depth for XOR, 1 for Reed-Solomon; `count`
//! is smaller than k for a block closed early by `flush`).
//!
//! Repair metadata (11 bytes, big endian):
//! - XOR: `first_id (8) | stride (2) | count (1)`;
//! - Reed-Solomon: `first_id (8) | k' (1) | m (1) | repair index (1)`.

use crate::api::{
    DecoderLimits, FecDecoder, FecEncoder, FecError, Recovered, RepairSymbol, Scheme, SourceStore,
    copy_padded,
};
use crate::gf256::Kernel;
use crate::rs::{MAX_SYMBOLS, ReedSolomon};

/// Length of XOR and RS repair metadata.
pub const BLOCK_META_LEN: usize = 11;

/// Parsed block-code repair metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockMeta {
    /// XOR block.
    Xor {
        /// First source id.
        first: u64,
        /// Distance between ids (interleaving depth).
        stride: u16,
        /// Sources in the block.
        count: u8,
    },
    /// Reed-Solomon block.
    Rs {
        /// First source id.
        first: u64,
        /// Sources in the block.
        k: u8,
        /// Repair symbols per block.
        m: u8,
        /// Index of this repair symbol (< m).
        index: u8,
    },
}

impl BlockMeta {
    /// Encodes the metadata.
    pub fn to_bytes(&self) -> [u8; BLOCK_META_LEN] {
        let mut b = [0u8; BLOCK_META_LEN];
        match *self {
            BlockMeta::Xor {
                first,
                stride,
                count,
            } => {
                b[..8].copy_from_slice(&first.to_be_bytes());
                b[8..10].copy_from_slice(&stride.to_be_bytes());
                b[10] = count;
            }
            BlockMeta::Rs { first, k, m, index } => {
                b[..8].copy_from_slice(&first.to_be_bytes());
                b[8] = k;
                b[9] = m;
                b[10] = index;
            }
        }
        b
    }

    /// Decodes XOR metadata.
    pub fn parse_xor(b: &[u8]) -> Result<Self, FecError> {
        let b: &[u8; BLOCK_META_LEN] = b.try_into().map_err(|_| FecError::Malformed("length"))?;
        Ok(BlockMeta::Xor {
            first: u64::from_be_bytes(b[..8].try_into().unwrap_or_default()),
            stride: u16::from_be_bytes([b[8], b[9]]),
            count: b[10],
        })
    }

    /// Decodes Reed-Solomon metadata.
    pub fn parse_rs(b: &[u8]) -> Result<Self, FecError> {
        let b: &[u8; BLOCK_META_LEN] = b.try_into().map_err(|_| FecError::Malformed("length"))?;
        Ok(BlockMeta::Rs {
            first: u64::from_be_bytes(b[..8].try_into().unwrap_or_default()),
            k: b[8],
            m: b[9],
            index: b[10],
        })
    }
}

enum Code {
    Xor,
    Rs(Box<ReedSolomon>),
}

fn take_buf(pool: &mut Vec<Vec<u8>>, size: usize) -> Vec<u8> {
    match pool.pop() {
        Some(mut v) => {
            v.resize(size, 0);
            v
        }
        None => vec![0u8; size],
    }
}

/// Encoder of the block codes.
pub struct BlockEncoder {
    code: Code,
    k: usize,
    m: usize,
    depth: usize,
    size: usize,
    kernel: Kernel,
    next_id: Option<u64>,
    group_first: u64,
    in_group: usize,
    /// RS: the k source buffers of the current block; XOR: the `depth` running XORs.
    bufs: Vec<Vec<u8>>,
    /// XOR: sources accumulated per interleaved block.
    counts: Vec<usize>,
    pending: Vec<RepairSymbol>,
    pool: Vec<Vec<u8>>,
}

impl BlockEncoder {
    /// Interleaved XOR encoder.
    pub fn xor(k: usize, depth: usize, size: usize) -> Result<Self, FecError> {
        Scheme::Xor {
            k: k.try_into().unwrap_or(0),
            depth: depth.try_into().unwrap_or(0),
        }
        .validate()?;
        Ok(Self::build(Code::Xor, k, 1, depth, size, depth))
    }

    /// Reed-Solomon encoder.
    pub fn reed_solomon(k: usize, m: usize, size: usize) -> Result<Self, FecError> {
        let rs = ReedSolomon::new(k, m)?;
        Ok(Self::build(Code::Rs(Box::new(rs)), k, m, 1, size, k))
    }

    fn build(code: Code, k: usize, m: usize, depth: usize, size: usize, nbufs: usize) -> Self {
        BlockEncoder {
            code,
            k,
            m,
            depth,
            size,
            kernel: Kernel::best(),
            next_id: None,
            group_first: 0,
            in_group: 0,
            bufs: (0..nbufs).map(|_| vec![0u8; size]).collect(),
            counts: vec![0; depth],
            pending: Vec::new(),
            pool: Vec::new(),
        }
    }

    fn emit_xor(&mut self, j: usize) {
        let count = self.counts[j];
        self.counts[j] = 0;
        let fresh = take_buf(&mut self.pool, self.size);
        let payload = std::mem::replace(&mut self.bufs[j], fresh);
        let meta = BlockMeta::Xor {
            first: self.group_first + j as u64,
            stride: self.depth as u16,
            count: count as u8,
        };
        self.pending
            .push(RepairSymbol::new(&meta.to_bytes(), payload));
    }

    fn emit_rs(&mut self, count: usize) {
        let Code::Rs(rs) = &self.code else { return };
        let mut payloads: Vec<Vec<u8>> = (0..self.m)
            .map(|_| take_buf(&mut self.pool, self.size))
            .collect();
        {
            let mut outs: Vec<&mut [u8]> = payloads.iter_mut().map(|p| p.as_mut_slice()).collect();
            // Shapes are valid by construction; an error cannot happen.
            if rs.encode(&self.bufs[..count], &mut outs).is_err() {
                return;
            }
        }
        for (index, payload) in payloads.into_iter().enumerate() {
            let meta = BlockMeta::Rs {
                first: self.group_first,
                k: count as u8,
                m: self.m as u8,
                index: index as u8,
            };
            self.pending
                .push(RepairSymbol::new(&meta.to_bytes(), payload));
        }
    }
}

impl FecEncoder for BlockEncoder {
    fn symbol_size(&self) -> usize {
        self.size
    }

    fn add_source(&mut self, id: u64, data: &[u8]) -> Result<(), FecError> {
        self.next_id = Some(crate::api::next_source_id(
            self.size,
            self.next_id,
            id,
            data,
        )?);
        if self.in_group == 0 {
            self.group_first = id;
        }
        let pos = self.in_group;
        self.in_group += 1;
        match self.code {
            Code::Xor => {
                let j = pos % self.depth;
                if self.counts[j] == 0 {
                    copy_padded(&mut self.bufs[j], data)?;
                } else {
                    self.kernel.xor_into(&mut self.bufs[j][..data.len()], data);
                }
                self.counts[j] += 1;
                if self.counts[j] == self.k {
                    self.emit_xor(j);
                }
                if self.in_group == self.k * self.depth {
                    self.in_group = 0;
                }
            }
            Code::Rs(_) => {
                copy_padded(&mut self.bufs[pos], data)?;
                if self.in_group == self.k {
                    self.emit_rs(self.k);
                    self.in_group = 0;
                }
            }
        }
        Ok(())
    }

    fn poll_repair(&mut self, out: &mut Vec<RepairSymbol>) {
        out.append(&mut self.pending);
    }

    fn flush(&mut self) {
        if self.in_group == 0 {
            return;
        }
        match self.code {
            Code::Xor => {
                for j in 0..self.depth {
                    if self.counts[j] > 0 {
                        self.emit_xor(j);
                    }
                }
            }
            Code::Rs(_) => self.emit_rs(self.in_group),
        }
        self.in_group = 0;
    }

    fn recycle(&mut self, symbol: RepairSymbol) {
        if self.pool.len() < 4 * self.m * self.depth + 8 && symbol.payload.capacity() >= self.size {
            self.pool.push(symbol.payload);
        }
    }
}

#[derive(Clone, Debug)]
struct Block {
    first: u64,
    stride: u64,
    count: usize,
    have: [u64; 4],
    nrep: usize,
    done: bool,
}

impl Block {
    fn contains(&self, id: u64) -> bool {
        id >= self.first
            && (id - self.first).is_multiple_of(self.stride)
            && (id - self.first) / self.stride < self.count as u64
    }
    fn has(&self, i: usize) -> bool {
        self.have[i / 64] >> (i % 64) & 1 == 1
    }
}

/// Decoder of the block codes. It holds at most `max_blocks` blocks (with
/// their repair symbols) and `max_span` source symbols, both from local limits.
pub struct BlockDecoder {
    code: Code,
    k: usize,
    m: usize,
    depth: usize,
    size: usize,
    kernel: Kernel,
    store: SourceStore,
    blocks: Vec<Option<Block>>,
    /// `max_blocks * m` repair payload buffers.
    repairs: Vec<u8>,
    /// Blocks holding repairs and still missing sources.
    pending: usize,
    /// Lowest first id of the blocks held (`u64::MAX` if none).
    oldest: u64,
}

impl BlockDecoder {
    /// A decoder for an XOR or Reed-Solomon scheme.
    pub fn new(scheme: Scheme, size: usize, limits: DecoderLimits) -> Result<Self, FecError> {
        scheme.validate()?;
        let (code, k, m, depth) = match scheme {
            Scheme::Xor { k, depth } => (Code::Xor, k as usize, 1, depth as usize),
            Scheme::ReedSolomon { k, m } => (
                Code::Rs(Box::new(ReedSolomon::new(k as usize, m as usize)?)),
                k as usize,
                m as usize,
                1,
            ),
            Scheme::Rlc { .. } => return Err(FecError::InvalidConfig("not a block code")),
        };
        let max_blocks = limits.max_blocks.max(1).max(2 * depth);
        let min_span = k * depth;
        let span = if limits.max_span == 0 {
            max_blocks.max(depth) * k
        } else {
            limits.max_span
        }
        .max(min_span);
        Ok(BlockDecoder {
            code,
            k,
            m,
            depth,
            size,
            kernel: Kernel::best(),
            store: SourceStore::new(size, span),
            blocks: vec![None; max_blocks],
            repairs: vec![0u8; max_blocks * m * size],
            pending: 0,
            oldest: u64::MAX,
        })
    }

    /// Applies `f` to block slot `s`, keeping the count of pending blocks.
    fn update(&mut self, s: usize, f: impl FnOnce(&mut Option<Block>)) {
        let pending = |b: &Option<Block>| b.as_ref().is_some_and(|b| !b.done && b.nrep > 0);
        let before = pending(&self.blocks[s]);
        f(&mut self.blocks[s]);
        let after = pending(&self.blocks[s]);
        self.pending = self.pending + usize::from(after) - usize::from(before);
    }

    /// Drops the blocks that start below the source store's window.
    fn drop_old_blocks(&mut self) {
        let low = self.store.low();
        if low <= self.oldest {
            return;
        }
        for s in 0..self.blocks.len() {
            if self.blocks[s].as_ref().is_some_and(|b| b.first < low) {
                self.update(s, |b| *b = None);
            }
        }
        self.recompute_oldest();
    }

    fn recompute_oldest(&mut self) {
        self.oldest = self
            .blocks
            .iter()
            .flatten()
            .map(|b| b.first)
            .min()
            .unwrap_or(u64::MAX);
    }

    /// Tries to complete block `slot`.
    fn try_decode(&mut self, slot: usize, out: &mut Vec<Recovered>) {
        let Some(b) = self.blocks[slot].clone() else {
            return;
        };
        if b.done {
            return;
        }
        let mut lost = [0u64; MAX_SYMBOLS];
        let mut nlost = 0;
        for i in 0..b.count {
            let id = b.first + i as u64 * b.stride;
            if !self.store.contains(id) {
                lost[nlost] = id;
                nlost += 1;
            }
        }
        if nlost == 0 {
            self.update(slot, |b| {
                if let Some(b) = b.as_mut() {
                    b.done = true;
                }
            });
            return;
        }
        if nlost > b.nrep {
            return;
        }
        let size = self.size;
        let rbase = slot * self.m * size;
        let mut outs: Vec<Vec<u8>> = (0..nlost).map(|_| vec![0u8; size]).collect();
        let ok = match &mut self.code {
            Code::Xor => {
                let mut srcs: [&[u8]; MAX_SYMBOLS + 1] = [&[]; MAX_SYMBOLS + 1];
                srcs[0] = &self.repairs[rbase..rbase + size];
                let mut n = 1;
                for i in 0..b.count {
                    if let Some(s) = self.store.get(b.first + i as u64 * b.stride) {
                        srcs[n] = s;
                        n += 1;
                    }
                }
                let ones = [1u8; MAX_SYMBOLS + 1];
                self.kernel
                    .mul_multi(&mut outs[0], &srcs[..n], &ones[..n], false);
                true
            }
            Code::Rs(rs) => {
                let data: Vec<Option<&[u8]>> = (0..b.count)
                    .map(|i| self.store.get(b.first + i as u64))
                    .collect();
                let mut reps: Vec<Option<&[u8]>> = vec![None; self.m];
                for (i, r) in reps.iter_mut().enumerate() {
                    if b.has(i) {
                        let o = rbase + i * size;
                        *r = Some(&self.repairs[o..o + size]);
                    }
                }
                let mut refs: Vec<&mut [u8]> = outs.iter_mut().map(|v| v.as_mut_slice()).collect();
                rs.reconstruct(&data[..b.count], &reps[..self.m], &mut refs)
                    .is_ok()
            }
        };
        self.update(slot, |b| {
            if let Some(b) = b.as_mut() {
                b.done = true;
            }
        });
        if !ok {
            return;
        }
        for (id, data) in lost[..nlost].iter().zip(outs) {
            if self.store.insert(*id, &data).is_ok() {
                out.push(Recovered { id: *id, data });
            }
        }
    }
}

impl FecDecoder for BlockDecoder {
    fn symbol_size(&self) -> usize {
        self.size
    }

    fn add_source(
        &mut self,
        id: u64,
        data: &[u8],
        recovered: &mut Vec<Recovered>,
    ) -> Result<(), FecError> {
        crate::api::check_received_source(self.size, self.store.low(), id, data)?;
        self.store.insert(id, data)?;
        self.drop_old_blocks();
        if self.pending == 0 {
            return Ok(());
        }
        for slot in 0..self.blocks.len() {
            let hit = self.blocks[slot]
                .as_ref()
                .is_some_and(|b| !b.done && b.nrep > 0 && b.contains(id));
            if hit {
                self.try_decode(slot, recovered);
            }
        }
        Ok(())
    }

    fn add_repair(
        &mut self,
        meta: &[u8],
        payload: &[u8],
        recovered: &mut Vec<Recovered>,
    ) -> Result<(), FecError> {
        if payload.len() != self.size {
            return Err(FecError::SymbolSize);
        }
        let (first, stride, count, index) = match self.code {
            Code::Xor => {
                let BlockMeta::Xor {
                    first,
                    stride,
                    count,
                } = BlockMeta::parse_xor(meta)?
                else {
                    return Err(FecError::Malformed("scheme"));
                };
                if stride as usize != self.depth {
                    return Err(FecError::Malformed("stride differs from the local depth"));
                }
                if count == 0 || count as usize > self.k {
                    return Err(FecError::Malformed("block size"));
                }
                (first, stride as u64, count as usize, 0)
            }
            Code::Rs(_) => {
                let BlockMeta::Rs { first, k, m, index } = BlockMeta::parse_rs(meta)? else {
                    return Err(FecError::Malformed("scheme"));
                };
                if k == 0 || k as usize > self.k || m as usize != self.m || index >= m {
                    return Err(FecError::Malformed("block shape"));
                }
                (first, 1, k as usize, index as usize)
            }
        };
        let last = (count as u64 - 1)
            .checked_mul(stride)
            .and_then(|d| first.checked_add(d))
            .filter(|&l| l < u64::MAX - 1)
            .ok_or(FecError::Malformed("block id overflow"))?;
        if first < self.store.low() {
            return Err(FecError::OutOfWindow);
        }
        let slot = match self
            .blocks
            .iter()
            .position(|b| b.as_ref().is_some_and(|b| b.first == first))
        {
            Some(s) => {
                let b = self.blocks[s]
                    .as_ref()
                    .ok_or(FecError::Malformed("state"))?;
                if b.stride != stride || b.count != count {
                    return Err(FecError::Malformed("inconsistent with an earlier repair"));
                }
                if b.has(index) {
                    return Err(FecError::Duplicate);
                }
                s
            }
            None => {
                let s = match self.blocks.iter().position(|b| b.is_none()) {
                    Some(s) => s,
                    None => {
                        let (s, oldest) = self
                            .blocks
                            .iter()
                            .enumerate()
                            .filter_map(|(i, b)| b.as_ref().map(|b| (i, b.first)))
                            .min_by_key(|&(_, f)| f)
                            .ok_or(FecError::Malformed("state"))?;
                        if first < oldest {
                            return Err(FecError::OutOfWindow);
                        }
                        s
                    }
                };
                self.update(s, |b| {
                    *b = Some(Block {
                        first,
                        stride,
                        count,
                        have: [0; 4],
                        nrep: 0,
                        done: false,
                    })
                });
                self.recompute_oldest();
                s
            }
        };
        let o = (slot * self.m + index) * self.size;
        self.repairs[o..o + self.size].copy_from_slice(payload);
        self.update(slot, |b| {
            if let Some(b) = b.as_mut() {
                b.have[index / 64] |= 1 << (index % 64);
                b.nrep += 1;
            }
        });
        self.store.advance_to(last);
        self.drop_old_blocks();
        self.try_decode(slot, recovered);
        Ok(())
    }
}
