//! HTTP/3 events for the connection's trace, after draft-ietf-quic-qlog-h3-events:
//! `http3:stream_type_set`, `http3:frame_created`, `http3:frame_parsed` and
//! `http3:parameters_set`. The bridge sees every byte h3 writes and reads, so a [`Scanner`]
//! per stream and direction follows the frames (type and length) without decoding their
//! payloads, except SETTINGS, whose values it reports. QPACK encoder and decoder streams carry
//! instructions, not frames: after their type nothing more is reported.

use qfec_proto::events::{ExtensionEvent, Value};

/// Largest SETTINGS payload reported (a longer one is reported without its values).
const MAX_SETTINGS: usize = 1024;

/// One event, with owned fields.
#[derive(Debug, Clone, PartialEq)]
pub struct H3Event {
    pub name: &'static str,
    pub fields: Vec<(&'static str, Field)>,
}

/// A field's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Field {
    U64(u64),
    Str(&'static str),
}

impl ExtensionEvent for H3Event {
    fn name(&self) -> &'static str {
        self.name
    }

    fn fields(&self, f: &mut dyn FnMut(&'static str, Value<'_>)) {
        for (k, v) in &self.fields {
            match v {
                Field::U64(x) => f(k, Value::U64(*x)),
                Field::Str(s) => f(k, Value::Str(s)),
            }
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

fn frame_type_name(ty: u64) -> &'static str {
    match ty {
        0x0 => "data",
        0x1 => "headers",
        0x3 => "cancel_push",
        0x4 => "settings",
        0x5 => "push_promise",
        0x7 => "goaway",
        0xd => "max_push_id",
        t if t >= 0x21 && (t - 0x21) % 0x1f == 0 => "reserved",
        _ => "unknown",
    }
}

fn stream_type_name(ty: u64) -> &'static str {
    match ty {
        0x0 => "control",
        0x1 => "push",
        0x2 => "qpack_encode",
        0x3 => "qpack_decode",
        t if t >= 0x21 && (t - 0x21) % 0x1f == 0 => "reserved",
        _ => "unknown",
    }
}

fn setting_name(id: u64) -> Option<&'static str> {
    Some(match id {
        0x1 => "max_table_capacity",
        0x6 => "max_field_section_size",
        0x7 => "blocked_streams_count",
        0x8 => "extended_connect",
        0x33 => "h3_datagram",
        _ => return None,
    })
}

/// A QUIC variable-length integer at the start of `b`: (value, its length), or None if `b`
/// is too short.
fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let len = 1usize << (first >> 6);
    if b.len() < len {
        return None;
    }
    let mut v = u64::from(first & 0x3f);
    for &x in &b[1..len] {
        v = (v << 8) | u64::from(x);
    }
    Some((v, len))
}

/// Follows one direction of one stream.
#[derive(Debug)]
pub struct Scanner {
    stream_id: u64,
    sent: bool,
    /// A unidirectional stream whose type has not been read yet.
    untyped: bool,
    /// QPACK instructions or an unknown stream type follow: nothing more to report.
    opaque: bool,
    /// Header bytes not complete yet (type and length varints: at most 16 bytes).
    header: Vec<u8>,
    /// Payload bytes of the current frame still to pass.
    skip: u64,
    /// SETTINGS payload being collected.
    settings: Option<Vec<u8>>,
}

impl Scanner {
    /// `sent`: our writes (frame_created), else the peer's (frame_parsed).
    pub fn new(stream_id: u64, unidirectional: bool, sent: bool) -> Self {
        Scanner {
            stream_id,
            sent,
            untyped: unidirectional,
            opaque: false,
            header: Vec::new(),
            skip: 0,
            settings: None,
        }
    }

    fn owner(&self) -> &'static str {
        if self.sent { "local" } else { "remote" }
    }

    /// A request stream's type (bidirectional streams carry no type on the wire).
    pub fn request_stream(stream_id: u64, local: bool) -> H3Event {
        H3Event {
            name: "http3:stream_type_set",
            fields: vec![
                ("stream_id", Field::U64(stream_id)),
                ("owner", Field::Str(if local { "local" } else { "remote" })),
                ("stream_type", Field::Str("request")),
            ],
        }
    }

    /// Reads `data`, the stream's next bytes in this direction; appends the events.
    pub fn feed(&mut self, mut data: &[u8], out: &mut Vec<H3Event>) {
        while !data.is_empty() && !self.opaque {
            if self.skip > 0 {
                let n = (self.skip as usize).min(data.len());
                if let Some(s) = &mut self.settings {
                    s.extend_from_slice(&data[..n]);
                }
                self.skip -= n as u64;
                data = &data[n..];
                if self.skip == 0
                    && let Some(s) = self.settings.take()
                {
                    out.push(self.parameters(&s));
                }
                continue;
            }
            // Gather a header: the stream type, or a frame's type and length.
            let take = (16 - self.header.len()).min(data.len());
            self.header.extend_from_slice(&data[..take]);
            let before = self.header.len() - take;
            let used = if self.untyped {
                let Some((ty, n)) = varint(&self.header) else {
                    data = &data[take..];
                    continue;
                };
                self.untyped = false;
                let name = stream_type_name(ty);
                self.opaque = ty != 0x0;
                out.push(H3Event {
                    name: "http3:stream_type_set",
                    fields: vec![
                        ("stream_id", Field::U64(self.stream_id)),
                        ("owner", Field::Str(self.owner())),
                        ("stream_type", Field::Str(name)),
                    ],
                });
                n
            } else {
                let Some((ty, a)) = varint(&self.header) else {
                    data = &data[take..];
                    continue;
                };
                let Some((len, b)) = varint(&self.header[a..]) else {
                    data = &data[take..];
                    continue;
                };
                out.push(H3Event {
                    name: if self.sent {
                        "http3:frame_created"
                    } else {
                        "http3:frame_parsed"
                    },
                    fields: vec![
                        ("stream_id", Field::U64(self.stream_id)),
                        ("length", Field::U64(len)),
                        ("frame.frame_type", Field::Str(frame_type_name(ty))),
                    ],
                });
                self.skip = len;
                if ty == 0x4 && (len as usize) <= MAX_SETTINGS {
                    self.settings = Some(Vec::with_capacity(len as usize));
                    if len == 0 {
                        out.push(self.parameters(&[]));
                        self.settings = None;
                    }
                }
                a + b
            };
            // What of this call's bytes the header used; the rest is payload.
            let consumed = used - before;
            self.header.clear();
            data = &data[consumed..];
        }
    }

    fn parameters(&self, mut payload: &[u8]) -> H3Event {
        let mut fields = vec![("owner", Field::Str(self.owner()))];
        while let Some((id, a)) = varint(payload) {
            let Some((v, b)) = varint(&payload[a..]) else {
                break;
            };
            if let Some(name) = setting_name(id) {
                fields.push((name, Field::U64(v)));
            }
            payload = &payload[a + b..];
        }
        H3Event {
            name: "http3:parameters_set",
            fields,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_types(events: &[H3Event]) -> Vec<(&'static str, u64)> {
        events
            .iter()
            .filter(|e| e.name == "http3:frame_created")
            .map(|e| {
                let ty = e.fields.iter().find(|f| f.0 == "frame.frame_type").unwrap();
                let len = e.fields.iter().find(|f| f.0 == "length").unwrap();
                match (&ty.1, &len.1) {
                    (Field::Str(t), Field::U64(l)) => (*t, *l),
                    _ => unreachable!(),
                }
            })
            .collect()
    }

    #[test]
    fn frames_split_anywhere_are_followed() {
        // A control stream: type 0, SETTINGS (max_field_section_size 16384, h3_datagram 1),
        // GOAWAY 0; then a request stream's HEADERS (3 bytes) and DATA (70 bytes, two-byte
        // length).
        let control = [
            0x00, 0x04, 0x07, 0x06, 0x80, 0x00, 0x40, 0x00, 0x33, 0x01, 0x07, 0x01, 0x00,
        ];
        let mut request = vec![0x01, 0x03, 1, 2, 3, 0x00, 0x40, 70];
        request.extend(std::iter::repeat_n(9u8, 70));
        for cut in 1..control.len() {
            let mut s = Scanner::new(3, true, true);
            let mut ev = Vec::new();
            s.feed(&control[..cut], &mut ev);
            s.feed(&control[cut..], &mut ev);
            assert_eq!(ev[0].name, "http3:stream_type_set");
            assert_eq!(
                frame_types(&ev),
                [("settings", 7), ("goaway", 1)],
                "cut {cut}"
            );
            let p = ev
                .iter()
                .find(|e| e.name == "http3:parameters_set")
                .unwrap();
            assert!(
                p.fields
                    .contains(&("max_field_section_size", Field::U64(16384)))
            );
            assert!(p.fields.contains(&("h3_datagram", Field::U64(1))));
        }
        for cut in 1..request.len() {
            let mut s = Scanner::new(0, false, true);
            let mut ev = Vec::new();
            for part in [&request[..cut], &request[cut..]] {
                s.feed(part, &mut ev);
            }
            assert_eq!(
                frame_types(&ev),
                [("headers", 3), ("data", 70)],
                "cut {cut}"
            );
        }
        // A QPACK encoder stream: its type, then nothing.
        let mut s = Scanner::new(7, true, false);
        let mut ev = Vec::new();
        s.feed(&[0x02, 0x3f, 0xe1, 0x1f, 0x01, 0x04], &mut ev);
        assert_eq!(ev.len(), 1);
        assert!(
            ev[0]
                .fields
                .contains(&("stream_type", Field::Str("qpack_encode")))
        );
    }
}
