//! The frame loop and the frame types accepted beyond the RFC 9000 core.

use std::fmt;

use super::{Frame, FrameError, PacketKind, decode_frame};
use crate::coding::Reader;

/// Frame types owned by extensions (FEC, multipath, ...). A connection implements it over its
/// extensions; each type has one owner, which parses its body and later handles it.
pub trait ExtensionFrames {
    /// If an extension owns `ty`: advances `r` over the frame's body (type already consumed).
    /// `None` when no extension owns the type. Never reads beyond `r` nor panics.
    fn decode_body(&self, ty: u64, r: &mut Reader<'_>) -> Option<Result<(), FrameError>>;
    fn is_ack_eliciting(&self, ty: u64) -> bool;
    fn allowed_in(&self, ty: u64, kind: PacketKind) -> bool;
}

/// Which frame types a connection accepts beyond the RFC 9000 core.
///
/// Types neither core, nor enabled, nor owned by an extension are FRAME_ENCODING_ERROR
/// (RFC 9000 §12.4).
#[derive(Clone, Copy, Default)]
pub struct FrameRegistry<'e> {
    /// RFC 9221 DATAGRAM (0x30/0x31): enable when we advertised max_datagram_frame_size.
    pub datagram: bool,
    /// ACK_FREQUENCY (0xaf) and IMMEDIATE_ACK (0x1f): enable when we advertised min_ack_delay.
    pub ack_frequency: bool,
    /// The multipath frames (PATH_ACK, PATH_ABANDON, ...): enable once both endpoints
    /// advertised initial_max_path_id.
    pub multipath: bool,
    pub extensions: Option<&'e dyn ExtensionFrames>,
}

impl fmt::Debug for FrameRegistry<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FrameRegistry")
            .field("datagram", &self.datagram)
            .field("ack_frequency", &self.ack_frequency)
            .field("multipath", &self.multipath)
            .field("extensions", &self.extensions.is_some())
            .finish()
    }
}

impl FrameRegistry<'_> {
    /// Like [`Frame::is_ack_eliciting`], asking the owning extension for extension frames.
    pub fn is_ack_eliciting(&self, frame: &Frame<'_>) -> bool {
        match frame {
            Frame::Extension { ty, .. } => self.extensions.is_none_or(|e| e.is_ack_eliciting(*ty)),
            f => f.is_ack_eliciting(),
        }
    }

    /// Like [`Frame::allowed_in`], asking the owning extension for extension frames.
    pub fn allowed_in(&self, frame: &Frame<'_>, kind: PacketKind) -> bool {
        match frame {
            Frame::Extension { ty, .. } => self.extensions.is_some_and(|e| e.allowed_in(*ty, kind)),
            f => f.allowed_in(kind),
        }
    }

    pub(super) fn decode_extension<'a>(
        &self,
        ty: u64,
        r: &mut Reader<'a>,
    ) -> Result<Frame<'a>, FrameError> {
        let mut probe = r.clone();
        let before = probe.position();
        match self.extensions.and_then(|e| e.decode_body(ty, &mut probe)) {
            None => return Err(FrameError::encoding(ty, "unknown frame type")),
            Some(res) => res?,
        }
        let consumed = probe.position() - before;
        let body = r.bytes(consumed).map_err(FrameError::truncated(ty))?;
        Ok(Frame::Extension { ty, body })
    }
}

/// Iterate over the frames of a decrypted packet payload.
///
/// Stops after the first error. An empty payload yields nothing; the caller treats a packet
/// without frames as PROTOCOL_VIOLATION (RFC 9000 §12.4).
pub fn parse_frames<'a>(payload: &'a [u8], registry: &'a FrameRegistry<'a>) -> FrameIter<'a> {
    FrameIter {
        r: Reader::new(payload),
        registry,
        failed: false,
    }
}

/// Iterator returned by [`parse_frames`].
#[derive(Debug, Clone)]
pub struct FrameIter<'a> {
    r: Reader<'a>,
    registry: &'a FrameRegistry<'a>,
    failed: bool,
}

impl FrameIter<'_> {
    /// Offset in the payload of the next frame.
    pub fn position(&self) -> usize {
        self.r.position()
    }
}

impl<'a> Iterator for FrameIter<'a> {
    type Item = Result<Frame<'a>, FrameError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.r.is_empty() {
            return None;
        }
        let res = decode_frame(&mut self.r, self.registry);
        self.failed = res.is_err();
        Some(res)
    }
}

impl std::iter::FusedIterator for FrameIter<'_> {}
