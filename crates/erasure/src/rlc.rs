//! Sliding-window random linear codes (RLC) per RFC 8681, over GF(2^8) and GF(2).
//!
//! Repair metadata is the RFC 8681 Repair FEC Payload ID (8 bytes, big endian):
//! `repair_key (16) | DT (4) | NSS (12) | ESI (32)`, where ESI is the low 32
//! bits of the first source id of the encoding window; the decoder expands it
//! to 64 bits next to the highest id it has seen (as QUIC packet numbers).
//!
//! The decoder keeps its linear system in reduced row echelon form over the
//! ids of its window: each equation is normalized on its lowest unknown id
//! (its pivot) and no pivot appears in another equation. An unknown is
//! recovered exactly when its equation has no other unknown, i.e. as soon as
//! the received symbols determine it. Received sources are substituted as
//! they arrive; ids that leave the window drop with their equations.

use crate::api::{
    DecoderLimits, FecDecoder, FecEncoder, FecError, Field, Recovered, RepairSymbol, Scheme,
    SourceStore, copy_padded,
};
use crate::gf256::{self, Kernel, MUL};
use crate::tinymt::TinyMt32;

/// Length of the RLC repair metadata (RFC 8681 Repair FEC Payload ID).
pub const RLC_META_LEN: usize = 8;

/// RFC 8681 section 3.6 `generate_coding_coefficients`: fills `cc` (one
/// coefficient per source symbol of the window) from the repair key and the
/// density threshold `dt` (0..=15).
pub fn generate_coding_coefficients(
    repair_key: u16,
    cc: &mut [u8],
    dt: u8,
    field: Field,
) -> Result<(), FecError> {
    if dt > 15 {
        return Err(FecError::Malformed("DT > 15"));
    }
    match field {
        Field::Gf2 => {
            if dt == 15 {
                cc.fill(1);
            } else {
                let mut s = TinyMt32::new(u32::from(repair_key));
                for c in cc.iter_mut() {
                    *c = u8::from(s.rand16() <= dt);
                }
            }
        }
        Field::Gf256 => {
            let mut s = TinyMt32::new(u32::from(repair_key));
            for c in cc.iter_mut() {
                if dt == 15 || s.rand16() <= dt {
                    let mut v = s.rand256();
                    while v == 0 {
                        v = s.rand256();
                    }
                    *c = v;
                } else {
                    *c = 0;
                }
            }
        }
    }
    Ok(())
}

/// Parsed RLC repair metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RlcMeta {
    /// Repair key (TinyMT32 seed).
    pub repair_key: u16,
    /// Density threshold (0..=15).
    pub dt: u8,
    /// Number of source symbols in the encoding window (1..=4095).
    pub nss: u16,
    /// Low 32 bits of the first source id of the window.
    pub esi: u32,
}

impl RlcMeta {
    /// Encodes the metadata.
    pub fn to_bytes(&self) -> [u8; RLC_META_LEN] {
        let mut b = [0u8; RLC_META_LEN];
        b[..2].copy_from_slice(&self.repair_key.to_be_bytes());
        let v = (u16::from(self.dt & 0xF) << 12) | (self.nss & 0x0FFF);
        b[2..4].copy_from_slice(&v.to_be_bytes());
        b[4..].copy_from_slice(&self.esi.to_be_bytes());
        b
    }

    /// Decodes the metadata.
    pub fn parse(b: &[u8]) -> Result<Self, FecError> {
        let b: &[u8; RLC_META_LEN] = b.try_into().map_err(|_| FecError::Malformed("length"))?;
        let v = u16::from_be_bytes([b[2], b[3]]);
        Ok(RlcMeta {
            repair_key: u16::from_be_bytes([b[0], b[1]]),
            dt: (v >> 12) as u8,
            nss: v & 0x0FFF,
            esi: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        })
    }
}

/// Expands a 32-bit ESI to the 64-bit id closest to `next` (the id expected next).
fn expand_esi(esi: u32, next: u64) -> u64 {
    const WIN: u64 = 1 << 32;
    const HALF: u64 = WIN / 2;
    let cand = (next & !(WIN - 1)) | u64::from(esi);
    if cand.saturating_add(HALF) <= next && cand <= u64::MAX - 2 * WIN {
        cand + WIN
    } else if cand > next.saturating_add(HALF) && cand >= WIN {
        cand - WIN
    } else {
        cand
    }
}

fn rlc_params(scheme: Scheme) -> Result<(usize, u8, Field, usize, usize), FecError> {
    scheme.validate()?;
    match scheme {
        Scheme::Rlc {
            window,
            density,
            field,
            interval,
            repairs,
        } => Ok((
            window as usize,
            density,
            field,
            interval as usize,
            repairs as usize,
        )),
        _ => Err(FecError::InvalidConfig("not an RLC scheme")),
    }
}

/// RFC 8681 sliding-window encoder.
pub struct RlcEncoder {
    window: usize,
    dt: u8,
    field: Field,
    interval: usize,
    repairs: usize,
    size: usize,
    kernel: Kernel,
    ring: Vec<Vec<u8>>,
    len: usize,
    next_id: Option<u64>,
    since: usize,
    key: u16,
    coefs: Vec<u8>,
    slot_coefs: Vec<u8>,
    pending: Vec<RepairSymbol>,
    pool: Vec<Vec<u8>>,
}

impl RlcEncoder {
    /// An encoder for an RLC scheme.
    pub fn new(scheme: Scheme, size: usize) -> Result<Self, FecError> {
        let (window, dt, field, interval, repairs) = rlc_params(scheme)?;
        Ok(RlcEncoder {
            window,
            dt,
            field,
            interval,
            repairs,
            size,
            kernel: Kernel::best(),
            ring: (0..window).map(|_| vec![0u8; size]).collect(),
            len: 0,
            next_id: None,
            since: 0,
            key: 0,
            coefs: vec![0u8; window],
            slot_coefs: vec![0u8; window],
            pending: Vec::new(),
            pool: Vec::new(),
        })
    }

    /// Number of source symbols currently in the encoding window.
    pub fn window_len(&self) -> usize {
        self.len
    }

    /// Generates one repair symbol over the current window (if not empty)
    /// into the pending list.
    pub fn emit_repair(&mut self) {
        let Some(next) = self.next_id else { return };
        if self.len == 0 {
            return;
        }
        let first = next - self.len as u64;
        let key = self.key;
        self.key = self.key.wrapping_add(1);
        let cc = &mut self.coefs[..self.len];
        if generate_coding_coefficients(key, cc, self.dt, self.field).is_err() {
            return;
        }
        let mut payload = match self.pool.pop() {
            Some(mut v) => {
                v.resize(self.size, 0);
                v
            }
            None => vec![0u8; self.size],
        };
        // Coefficients in ring-slot order (slots outside the window get 0), so
        // the kernel reads the ring directly.
        let w = self.window;
        let start = (first % w as u64) as usize;
        let slot_cc = &mut self.slot_coefs;
        slot_cc.fill(0);
        for (t, &c) in cc.iter().enumerate() {
            let s = start + t;
            slot_cc[if s >= w { s - w } else { s }] = c;
        }
        self.kernel
            .mul_multi(&mut payload, &self.ring, slot_cc, false);
        let meta = RlcMeta {
            repair_key: key,
            dt: self.dt,
            nss: self.len as u16,
            esi: first as u32,
        };
        self.pending
            .push(RepairSymbol::new(&meta.to_bytes(), payload));
    }
}

impl FecEncoder for RlcEncoder {
    fn symbol_size(&self) -> usize {
        self.size
    }

    fn add_source(&mut self, id: u64, data: &[u8]) -> Result<(), FecError> {
        let next = crate::api::next_source_id(self.size, self.next_id, id, data)?;
        let slot = (id % self.window as u64) as usize;
        copy_padded(&mut self.ring[slot], data)?;
        self.next_id = Some(next);
        self.len = (self.len + 1).min(self.window);
        self.since += 1;
        if self.since >= self.interval {
            self.since = 0;
            for _ in 0..self.repairs {
                self.emit_repair();
            }
        }
        Ok(())
    }

    fn poll_repair(&mut self, out: &mut Vec<RepairSymbol>) {
        out.append(&mut self.pending);
    }

    fn flush(&mut self) {
        self.since = 0;
        self.emit_repair();
    }

    fn recycle(&mut self, symbol: RepairSymbol) {
        if self.pool.len() < 2 * self.repairs + 8 && symbol.payload.capacity() >= self.size {
            self.pool.push(symbol.payload);
        }
    }
}

const NONE: u32 = u32::MAX;
/// Slots of the table of repair metadata remembered to reject duplicates.
const RECENT: usize = 256;

struct Equation {
    active: bool,
    pivot: u64,
    /// Highest id that may have a nonzero coefficient.
    max: u64,
    /// Coefficients, indexed by `id & mask`.
    coefs: Vec<u8>,
    data: Vec<u8>,
}

/// RFC 8681 decoder with on-the-fly Gaussian elimination, bounded by a span
/// of source ids fixed by local configuration.
pub struct RlcDecoder {
    field: Field,
    max_nss: usize,
    size: usize,
    kernel: Kernel,
    /// Power of two >= the span: coefficient ring length.
    ring: usize,
    mask: u64,
    store: SourceStore,
    eqs: Vec<Equation>,
    free: Vec<usize>,
    /// Equation whose pivot is the id at `id & mask`, or NONE.
    pivot_of: Vec<u32>,
    /// Recently seen repair metadata, hashed into a fixed table (duplicate check).
    recent: Vec<u64>,
    cc: Vec<u8>,
    tmp: Vec<u8>,
    /// Scratch list of equations changed by one step (kept to avoid allocating).
    touched: Vec<usize>,
}

impl RlcDecoder {
    /// A decoder for an RLC scheme. It holds at most `limits.max_span`
    /// source ids (default: four encoding windows) and one equation per
    /// unknown id of that span.
    pub fn new(scheme: Scheme, size: usize, limits: DecoderLimits) -> Result<Self, FecError> {
        let (window, _, field, _, _) = rlc_params(scheme)?;
        let span = if limits.max_span == 0 {
            4 * window
        } else {
            limits.max_span.max(window)
        };
        let ring = span.next_power_of_two();
        Ok(RlcDecoder {
            field,
            max_nss: window,
            size,
            kernel: Kernel::best(),
            ring,
            mask: ring as u64 - 1,
            store: SourceStore::new(size, span),
            eqs: Vec::new(),
            free: Vec::new(),
            pivot_of: vec![NONE; ring],
            recent: vec![u64::MAX; RECENT],
            cc: vec![0u8; window],
            tmp: vec![0u8; size],
            touched: Vec::new(),
        })
    }

    /// Equations currently held (unknowns involved in received repairs).
    pub fn pending_equations(&self) -> usize {
        self.eqs.len() - self.free.len()
    }

    #[inline]
    fn idx(&self, id: u64) -> usize {
        (id & self.mask) as usize
    }

    fn pivot_eq(&self, id: u64) -> Option<usize> {
        let e = self.pivot_of[self.idx(id)];
        if e != NONE && self.eqs[e as usize].active && self.eqs[e as usize].pivot == id {
            Some(e as usize)
        } else {
            None
        }
    }

    fn release(&mut self, e: usize) {
        let (pivot, max) = (self.eqs[e].pivot, self.eqs[e].max);
        if self.pivot_eq(pivot) == Some(e) {
            let i = self.idx(pivot);
            self.pivot_of[i] = NONE;
        }
        let mask = self.mask;
        let eq = &mut self.eqs[e];
        if max.saturating_sub(pivot) >= mask {
            eq.coefs.fill(0);
        } else {
            let mut id = pivot;
            while id <= max {
                eq.coefs[(id & mask) as usize] = 0;
                id += 1;
            }
        }
        eq.active = false;
        self.free.push(e);
    }

    fn alloc(&mut self) -> usize {
        if let Some(e) = self.free.pop() {
            return e;
        }
        self.eqs.push(Equation {
            active: false,
            pivot: 0,
            max: 0,
            coefs: vec![0u8; self.ring],
            data: vec![0u8; self.size],
        });
        self.eqs.len() - 1
    }

    /// Drops the equations whose pivot left the window.
    fn slide(&mut self) {
        let low = self.store.low();
        for e in 0..self.eqs.len() {
            if self.eqs[e].active && self.eqs[e].pivot < low {
                self.release(e);
            }
        }
    }

    /// Gives equation `e` (already reduced against the other pivots) a pivot
    /// at its lowest unknown id `>= from`, normalizes it, eliminates that
    /// pivot from the other equations and reports what got solved.
    fn install(&mut self, e: usize, from: u64, out: &mut Vec<Recovered>) {
        let mask = self.mask;
        let (max, pivot) = {
            let eq = &self.eqs[e];
            let mut id = from;
            let mut pivot = None;
            while id <= eq.max {
                if eq.coefs[(id & mask) as usize] != 0 {
                    pivot = Some(id);
                    break;
                }
                id += 1;
            }
            (eq.max, pivot)
        };
        let Some(pivot) = pivot else {
            // Non-innovative: nothing unknown remains.
            self.eqs[e].pivot = from;
            self.release(e);
            return;
        };
        let c = self.eqs[e].coefs[(pivot & mask) as usize];
        if c != 1 {
            let s = gf256::inv(c);
            let t = &MUL[s as usize];
            let eq = &mut self.eqs[e];
            for id in pivot..=max {
                let i = (id & mask) as usize;
                eq.coefs[i] = t[eq.coefs[i] as usize];
            }
            self.kernel.mul_set(&mut self.tmp, &eq.data, s);
            std::mem::swap(&mut self.tmp, &mut eq.data);
        }
        self.eqs[e].pivot = pivot;
        self.eqs[e].active = true;
        let pi = self.idx(pivot);
        self.pivot_of[pi] = e as u32;
        // Back-substitute: remove `pivot` from every other equation.
        let row = std::mem::take(&mut self.eqs[e].coefs);
        let data = std::mem::take(&mut self.eqs[e].data);
        let mut touched = std::mem::take(&mut self.touched);
        touched.clear();
        for q in 0..self.eqs.len() {
            if q == e || !self.eqs[q].active {
                continue;
            }
            let eq = &mut self.eqs[q];
            if pivot < eq.pivot || pivot > eq.max {
                continue;
            }
            let f = eq.coefs[pi];
            if f == 0 {
                continue;
            }
            let t = &MUL[f as usize];
            for id in pivot..=max {
                let i = (id & mask) as usize;
                eq.coefs[i] ^= t[row[i] as usize];
            }
            eq.max = eq.max.max(max);
            self.kernel.mul_acc(&mut eq.data, &data, f);
            touched.push(q);
        }
        // Solved when the pivot is the only unknown left.
        self.eqs[e].coefs = row;
        self.eqs[e].data = data;
        self.check_solved(e, out);
        for &q in &touched {
            self.check_solved(q, out);
        }
        self.touched = touched;
    }

    fn check_solved(&mut self, e: usize, out: &mut Vec<Recovered>) {
        let mask = self.mask;
        let eq = &mut self.eqs[e];
        if !eq.active {
            return;
        }
        let mut id = eq.max;
        while id > eq.pivot && eq.coefs[(id & mask) as usize] == 0 {
            id -= 1;
        }
        eq.max = id;
        if id != eq.pivot {
            return;
        }
        let pivot = eq.pivot;
        let data = eq.data.clone();
        if self.store.insert(pivot, &data).is_ok() {
            out.push(Recovered { id: pivot, data });
        }
        self.release(e);
    }

    fn receive_repair(
        &mut self,
        meta: &[u8],
        payload: &[u8],
        out: &mut Vec<Recovered>,
    ) -> Result<(), FecError> {
        if payload.len() != self.size {
            return Err(FecError::SymbolSize);
        }
        let m = RlcMeta::parse(meta)?;
        let nss = m.nss as usize;
        if nss == 0 || nss > self.max_nss {
            return Err(FecError::Malformed("NSS outside the local window"));
        }
        let first = expand_esi(m.esi, self.store.end());
        let last = first
            .checked_add(nss as u64 - 1)
            .filter(|&l| l < u64::MAX - 1)
            .ok_or(FecError::Malformed("id overflow"))?;
        if first < self.store.low() {
            return Err(FecError::OutOfWindow);
        }
        let key = u64::from_be_bytes(m.to_bytes());
        let h = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize % RECENT;
        if self.recent[h] == key {
            return Err(FecError::Duplicate);
        }
        self.recent[h] = key;
        self.store.advance_to(last);
        self.slide();
        // Every covered source is known (the common case without loss): nothing to learn,
        // and no arithmetic spent to find it out.
        if (first..=last).all(|id| self.store.contains(id)) {
            return Ok(());
        }
        generate_coding_coefficients(m.repair_key, &mut self.cc[..nss], m.dt, self.field)?;

        let e = self.alloc();
        let mask = self.mask;
        let mut eq_data = std::mem::take(&mut self.eqs[e].data);
        let mut eq_coefs = std::mem::take(&mut self.eqs[e].coefs);
        eq_data.copy_from_slice(payload);
        // Substitute the known sources (fused, 64 at a time).
        let mut srcs: [&[u8]; 64] = [&[]; 64];
        let mut cs = [0u8; 64];
        let mut n = 0;
        let mut lo = None;
        let mut hi = first;
        for (t, &c) in self.cc[..nss].iter().enumerate() {
            if c == 0 {
                continue;
            }
            let id = first + t as u64;
            match self.store.get(id) {
                Some(s) => {
                    srcs[n] = s;
                    cs[n] = c;
                    n += 1;
                    if n == 64 {
                        self.kernel.mul_multi(&mut eq_data, &srcs, &cs, true);
                        n = 0;
                    }
                }
                None => {
                    eq_coefs[(id & mask) as usize] = c;
                    lo.get_or_insert(id);
                    hi = id;
                }
            }
        }
        if n > 0 {
            self.kernel
                .mul_multi(&mut eq_data, &srcs[..n], &cs[..n], true);
        }
        let Some(lo) = lo else {
            // Every source is known: nothing to learn.
            self.eqs[e].data = eq_data;
            self.eqs[e].coefs = eq_coefs;
            self.free.push(e);
            return Ok(());
        };
        // Reduce against the existing pivots.
        let mut max = hi;
        let mut n = 0;
        for id in lo..=hi {
            let i = (id & mask) as usize;
            let c = eq_coefs[i];
            if c == 0 {
                continue;
            }
            let Some(p) = self.pivot_eq(id) else { continue };
            let peq = &self.eqs[p];
            let t = &MUL[c as usize];
            for pid in peq.pivot..=peq.max {
                let j = (pid & mask) as usize;
                eq_coefs[j] ^= t[peq.coefs[j] as usize];
            }
            max = max.max(peq.max);
            srcs[n] = &peq.data;
            cs[n] = c;
            n += 1;
            if n == 64 {
                self.kernel.mul_multi(&mut eq_data, &srcs, &cs, true);
                n = 0;
            }
        }
        if n > 0 {
            self.kernel
                .mul_multi(&mut eq_data, &srcs[..n], &cs[..n], true);
        }
        let eq = &mut self.eqs[e];
        eq.data = eq_data;
        eq.coefs = eq_coefs;
        eq.max = max;
        eq.pivot = lo;
        self.install(e, lo, out);
        Ok(())
    }
}

impl FecDecoder for RlcDecoder {
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
        self.slide();
        let mask = self.mask;
        let i = self.idx(id);
        let src = self.store.get(id).ok_or(FecError::OutOfWindow)?;
        if let Some(e) = self.pivot_eq(id) {
            let eq = &mut self.eqs[e];
            self.kernel.xor_into(&mut eq.data, src);
            eq.coefs[i] = 0;
            self.pivot_of[i] = NONE;
            let from = id + 1;
            if from > eq.max {
                eq.pivot = from;
                eq.max = from;
                self.release(e);
            } else {
                self.install(e, from, recovered);
            }
            return Ok(());
        }
        let mut touched = std::mem::take(&mut self.touched);
        touched.clear();
        for q in 0..self.eqs.len() {
            let eq = &mut self.eqs[q];
            if !eq.active || id < eq.pivot || id > eq.max {
                continue;
            }
            let c = eq.coefs[(id & mask) as usize];
            if c == 0 {
                continue;
            }
            self.kernel.mul_acc(&mut eq.data, src, c);
            eq.coefs[(id & mask) as usize] = 0;
            touched.push(q);
        }
        for &q in &touched {
            self.check_solved(q, recovered);
        }
        self.touched = touched;
        Ok(())
    }

    fn add_repair(
        &mut self,
        meta: &[u8],
        payload: &[u8],
        recovered: &mut Vec<Recovered>,
    ) -> Result<(), FecError> {
        self.receive_repair(meta, payload, recovered)
    }
}
