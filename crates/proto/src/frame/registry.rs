//! The frame loop and the extension mechanism.

use std::fmt;
use std::sync::Arc;

use super::{Frame, FrameError, PacketKind, decode_frame};
use crate::coding::Reader;

/// A family of frame types added by an extension (FEC, multipath, ...).
///
/// The frame loop hands it every type that no enabled built-in claims; the decoded frame is a
/// [`Frame::Extension`] whose body the extension's own code parses again later.
pub trait FrameExtension: Send + Sync {
    fn name(&self) -> &'static str;
    fn handles(&self, ty: u64) -> bool;
    /// Advance `r` over the body of a frame of type `ty` (type already consumed); Err if
    /// malformed. Must never read beyond `r` nor panic on any input.
    fn skip_body(&self, ty: u64, r: &mut Reader<'_>) -> Result<(), FrameError>;
    fn is_ack_eliciting(&self, _ty: u64) -> bool {
        true
    }
    fn allowed_in(&self, _ty: u64, kind: PacketKind) -> bool {
        matches!(kind, PacketKind::OneRtt | PacketKind::ZeroRtt)
    }
}

/// Which frame types a connection accepts beyond the RFC 9000 core.
///
/// Types neither core, nor enabled, nor claimed by an extension are FRAME_ENCODING_ERROR
/// (RFC 9000 §12.4).
#[derive(Clone, Default)]
pub struct FrameRegistry {
    /// RFC 9221 DATAGRAM (0x30/0x31): enable when we advertised max_datagram_frame_size.
    pub datagram: bool,
    /// ACK_FREQUENCY (0xaf) and IMMEDIATE_ACK (0x1f): enable when we advertised min_ack_delay.
    pub ack_frequency: bool,
    extensions: Vec<Arc<dyn FrameExtension>>,
}

impl fmt::Debug for FrameRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FrameRegistry")
            .field("datagram", &self.datagram)
            .field("ack_frequency", &self.ack_frequency)
            .field(
                "extensions",
                &self.extensions.iter().map(|e| e.name()).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl FrameRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an extension; earlier registrations win when two claim the same type.
    pub fn register(&mut self, ext: Arc<dyn FrameExtension>) {
        self.extensions.push(ext);
    }

    pub fn extension_for(&self, ty: u64) -> Option<&Arc<dyn FrameExtension>> {
        self.extensions.iter().find(|e| e.handles(ty))
    }

    /// Like [`Frame::is_ack_eliciting`], asking the owning extension for extension frames.
    pub fn is_ack_eliciting(&self, frame: &Frame<'_>) -> bool {
        match frame {
            Frame::Extension { ty, .. } => self
                .extension_for(*ty)
                .is_none_or(|e| e.is_ack_eliciting(*ty)),
            f => f.is_ack_eliciting(),
        }
    }

    /// Like [`Frame::allowed_in`], asking the owning extension for extension frames.
    pub fn allowed_in(&self, frame: &Frame<'_>, kind: PacketKind) -> bool {
        match frame {
            Frame::Extension { ty, .. } => self
                .extension_for(*ty)
                .is_some_and(|e| e.allowed_in(*ty, kind)),
            f => f.allowed_in(kind),
        }
    }

    pub(super) fn decode_extension<'a>(
        &self,
        ty: u64,
        r: &mut Reader<'a>,
    ) -> Result<Frame<'a>, FrameError> {
        let Some(ext) = self.extension_for(ty) else {
            return Err(FrameError::encoding(ty, "unknown frame type"));
        };
        let mut probe = r.clone();
        let before = probe.position();
        ext.skip_body(ty, &mut probe)?;
        let consumed = probe.position() - before;
        let body = r.bytes(consumed).map_err(FrameError::truncated(ty))?;
        Ok(Frame::Extension { ty, body })
    }
}

/// Iterate over the frames of a decrypted packet payload.
///
/// Stops after the first error. An empty payload yields nothing; the caller treats a packet
/// without frames as PROTOCOL_VIOLATION (RFC 9000 §12.4).
pub fn parse_frames<'a>(payload: &'a [u8], registry: &'a FrameRegistry) -> FrameIter<'a> {
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
    registry: &'a FrameRegistry,
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
