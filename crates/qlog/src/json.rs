//! The mapping of `qfec_proto::events` to qlog records (draft-ietf-quic-qlog-quic-events).

use std::time::Duration;

use qfec_proto::ConnectionError;
use qfec_proto::connection::SpaceId;
use qfec_proto::events::{
    Event, FrameInfo, PacketEvent, PacketHeader, RecoveryMetrics, Value as ExtValue,
};
use qfec_proto::transport_params::TransportParameters;
use qfec_proto::{Instant, error_code};
use serde_json::{Map, Value, json};

/// The qlog record of an event: `{"time", "name", "data"}`; `None` for events this mapping
/// does not know (the core's event enum may grow).
pub fn event_record(now: Instant, event: &Event<'_>) -> Option<Value> {
    let (name, data): (&str, Value) = match event {
        Event::PacketSent(p) => ("quic:packet_sent", packet(p)),
        Event::PacketReceived(p) => ("quic:packet_received", packet(p)),
        Event::PacketDropped(d) => {
            let mut m = Map::new();
            if let Some(h) = &d.header {
                m.insert("header".into(), header(h));
            }
            m.insert("raw".into(), json!({"length": d.size}));
            m.insert("trigger".into(), d.reason.as_str().into());
            ("quic:packet_dropped", Value::Object(m))
        }
        Event::PacketBuffered(h) => (
            "quic:packet_buffered",
            json!({"header": header(h), "trigger": "keys_unavailable"}),
        ),
        Event::PacketLost(l) => (
            "quic:packet_lost",
            json!({
                "header": header(&l.header),
                "frames": l.frames.iter().map(frame).collect::<Vec<_>>(),
                "trigger": l.trigger.as_str(),
            }),
        ),
        Event::PacketsAcked {
            space,
            packet_numbers,
        } => (
            "quic:packets_acked",
            json!({"packet_number_space": space_name(*space), "packet_numbers": packet_numbers}),
        ),
        Event::MetricsUpdated(m) => ("quic:recovery_metrics_updated", metrics(m)),
        Event::CongestionStateUpdated { old, new, trigger } => {
            let mut m = Map::new();
            if let Some(o) = old {
                m.insert("old".into(), o.as_str().into());
            }
            m.insert("new".into(), new.as_str().into());
            if let Some(t) = trigger {
                m.insert("trigger".into(), t.as_str().into());
            }
            ("quic:congestion_state_updated", Value::Object(m))
        }
        Event::MtuUpdated { old, new } => ("quic:mtu_updated", json!({"old": old, "new": new})),
        Event::EcnStateUpdated { old, new } => (
            "quic:ecn_state_updated",
            json!({"old": old.as_str(), "new": new.as_str()}),
        ),
        Event::KeyUpdated {
            key_type,
            key_phase,
            trigger,
        } => (
            "quic:key_updated",
            key(key_type.as_str(), *key_phase, trigger.as_str()),
        ),
        Event::KeyDiscarded {
            key_type,
            key_phase,
            trigger,
        } => (
            "quic:key_discarded",
            key(key_type.as_str(), *key_phase, trigger.as_str()),
        ),
        Event::ConnectionStateUpdated { old, new } => {
            let mut m = Map::new();
            if let Some(o) = old {
                m.insert("old".into(), o.as_str().into());
            }
            m.insert("new".into(), new.as_str().into());
            ("quic:connection_state_updated", Value::Object(m))
        }
        Event::ConnectionClosed { initiator, error } => {
            let mut m = closed(error);
            m.insert("initiator".into(), initiator.as_str().into());
            ("quic:connection_closed", Value::Object(m))
        }
        Event::ParametersSet { initiator, params } => {
            let mut m = parameters(params);
            m.insert("initiator".into(), initiator.as_str().into());
            ("quic:parameters_set", Value::Object(m))
        }
        Event::VersionInformation {
            server_versions,
            client_versions,
            chosen,
        } => {
            let mut m = Map::new();
            if !server_versions.is_empty() {
                m.insert("server_versions".into(), versions(server_versions));
            }
            if !client_versions.is_empty() {
                m.insert("client_versions".into(), versions(client_versions));
            }
            if let Some(c) = chosen {
                m.insert("chosen_version".into(), version(*c));
            }
            ("quic:version_information", Value::Object(m))
        }
        Event::SpuriousLoss {
            space,
            packet_number,
            distance,
            delay,
        } => (
            "recovery:spurious_loss",
            json!({
                "packet_number_space": space_name(*space),
                "packet_number": packet_number,
                "distance": distance,
                "delay": dur_ms(*delay),
            }),
        ),
        Event::LossThresholdsUpdated {
            space,
            packet_threshold,
            time_threshold,
            trigger,
        } => (
            "recovery:loss_thresholds_updated",
            json!({
                "packet_number_space": space_name(*space),
                "packet_threshold": packet_threshold,
                "time_threshold": time_threshold,
                "trigger": trigger,
            }),
        ),
        Event::CongestionUndone { window } => (
            "recovery:congestion_undone",
            json!({"congestion_window": window}),
        ),
        Event::Extension(e) => {
            let mut m = Map::new();
            e.fields(&mut |k, v| {
                let v = match v {
                    ExtValue::U64(x) => Value::from(x),
                    ExtValue::F64(x) => Value::from(x),
                    ExtValue::Bool(x) => Value::from(x),
                    ExtValue::Str(x) => Value::from(x),
                };
                // A dotted field is nested: `frame.frame_type` is {"frame": {"frame_type": ..}}.
                let mut obj = &mut m;
                let mut parts = k.split('.').peekable();
                while let Some(part) = parts.next() {
                    if parts.peek().is_none() {
                        obj.insert(part.into(), v);
                        break;
                    }
                    let inner = obj.entry(part).or_insert_with(|| Value::Object(Map::new()));
                    if !inner.is_object() {
                        *inner = Value::Object(Map::new());
                    }
                    obj = inner.as_object_mut().expect("an object");
                }
            });
            (e.name(), Value::Object(m))
        }
        _ => return None,
    };
    let mut record = json!({"time": ms(now), "name": name, "data": data});
    // Multipath: the path a packet went on, as the event's tuple (main schema §6.5).
    if let Some(id) = packet_path(event) {
        record["tuple"] = id.to_string().into();
    }
    Some(record)
}

fn ms(now: Instant) -> f64 {
    now.as_nanos() as f64 / 1e6
}

fn dur_ms(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1e6
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn version(v: u32) -> Value {
    Value::from(format!("{v:08x}"))
}

fn versions(vs: &[u32]) -> Value {
    Value::Array(vs.iter().map(|v| version(*v)).collect())
}

fn space_name(s: SpaceId) -> &'static str {
    match s {
        SpaceId::Initial => "initial",
        SpaceId::Handshake => "handshake",
        SpaceId::Data => "application_data",
    }
}

fn header(h: &PacketHeader) -> Value {
    let mut m = Map::new();
    m.insert("packet_type".into(), h.packet_type.as_str().into());
    if let Some(pn) = h.packet_number {
        m.insert("packet_number".into(), pn.into());
    }
    if let Some(k) = h.key_phase_bit {
        m.insert("key_phase_bit".into(), k.into());
    }
    if let Some(v) = h.version {
        m.insert("version".into(), version(v));
    }
    if let Some(c) = &h.scid {
        m.insert("scil".into(), c.len().into());
        m.insert("scid".into(), c.to_string().into());
    }
    if let Some(c) = &h.dcid {
        m.insert("dcil".into(), c.len().into());
        m.insert("dcid".into(), c.to_string().into());
    }
    if let Some(len) = h.token_len {
        m.insert("token".into(), json!({"raw": {"length": len}}));
    }
    Value::Object(m)
}

/// The path ID of a packet event's packet, when it has one.
fn packet_path(event: &Event<'_>) -> Option<u32> {
    match event {
        Event::PacketSent(p) | Event::PacketReceived(p) => p.header.path_id,
        Event::PacketLost(l) => l.header.path_id,
        _ => None,
    }
}

fn packet(p: &PacketEvent<'_>) -> Value {
    let mut m = Map::new();
    m.insert("header".into(), header(&p.header));
    m.insert(
        "frames".into(),
        Value::Array(p.frames.to_vec().iter().map(frame).collect()),
    );
    // The AEAD tag counts as a 16-byte trailer (quic-events §1.2).
    m.insert("raw".into(), json!({"length": p.size}));
    if !p.supported_versions.is_empty() {
        m.insert("supported_versions".into(), versions(p.supported_versions));
    }
    if let Some(t) = &p.stateless_reset_token {
        m.insert("stateless_reset_token".into(), hex(t).into());
    }
    if p.is_mtu_probe {
        m.insert("is_mtu_probe_packet".into(), true.into());
    }
    if let Some(t) = p.trigger {
        let t = match t {
            qfec_proto::events::PacketSentTrigger::PtoProbe => "pto_probe",
            _ => "retransmit_timeout",
        };
        m.insert("trigger".into(), t.into());
    }
    Value::Object(m)
}

fn stream_type(bidi: bool) -> &'static str {
    if bidi {
        "bidirectional"
    } else {
        "unidirectional"
    }
}

/// A frame as qlog's `$QuicFrame`.
pub(crate) fn frame(f: &FrameInfo) -> Value {
    match f {
        FrameInfo::Padding { len } => {
            json!({"frame_type": "padding", "raw": {"length": len, "payload_length": len}})
        }
        FrameInfo::Ping => json!({"frame_type": "ping"}),
        FrameInfo::Ack {
            delay_micros,
            ranges,
            ecn,
        } => {
            let ranges: Vec<Value> = ranges
                .iter()
                .map(|&(lo, hi)| {
                    if lo == hi {
                        json!([lo])
                    } else {
                        json!([lo, hi])
                    }
                })
                .collect();
            let mut m = json!({
                "frame_type": "ack",
                "ack_delay": *delay_micros as f64 / 1000.0,
                "acked_ranges": ranges,
            });
            if let Some((ect0, ect1, ce)) = ecn {
                m["ect0"] = (*ect0).into();
                m["ect1"] = (*ect1).into();
                m["ce"] = (*ce).into();
            }
            m
        }
        FrameInfo::ResetStream {
            id,
            error_code,
            final_size,
        } => json!({
            "frame_type": "reset_stream", "stream_id": id.0, "error": "unknown",
            "error_code": error_code, "final_size": final_size,
        }),
        FrameInfo::StopSending { id, error_code } => json!({
            "frame_type": "stop_sending", "stream_id": id.0, "error": "unknown",
            "error_code": error_code,
        }),
        FrameInfo::Crypto { offset, len } => {
            json!({"frame_type": "crypto", "offset": offset, "raw": {"length": len}})
        }
        FrameInfo::NewToken { len } => {
            json!({"frame_type": "new_token", "token": {"raw": {"length": len}}})
        }
        FrameInfo::Stream {
            id,
            offset,
            len,
            fin,
        } => json!({
            "frame_type": "stream", "stream_id": id.0, "offset": offset, "fin": fin,
            "raw": {"length": len},
        }),
        FrameInfo::MaxData(m) => json!({"frame_type": "max_data", "maximum": m}),
        FrameInfo::MaxStreamData { id, max } => {
            json!({"frame_type": "max_stream_data", "stream_id": id.0, "maximum": max})
        }
        FrameInfo::MaxStreams { bidi, max } => json!({
            "frame_type": "max_streams", "stream_type": stream_type(*bidi), "maximum": max,
        }),
        FrameInfo::DataBlocked(l) => json!({"frame_type": "data_blocked", "limit": l}),
        FrameInfo::StreamDataBlocked { id, limit } => {
            json!({"frame_type": "stream_data_blocked", "stream_id": id.0, "limit": limit})
        }
        FrameInfo::StreamsBlocked { bidi, limit } => json!({
            "frame_type": "streams_blocked", "stream_type": stream_type(*bidi), "limit": limit,
        }),
        FrameInfo::NewConnectionId {
            seq,
            retire_prior_to,
            cid,
        } => {
            let cid = cid.map(|c| c.to_string()).unwrap_or_default();
            json!({
                "frame_type": "new_connection_id", "sequence_number": seq,
                "retire_prior_to": retire_prior_to, "connection_id_length": cid.len() / 2,
                "connection_id": cid,
            })
        }
        FrameInfo::RetireConnectionId { seq } => {
            json!({"frame_type": "retire_connection_id", "sequence_number": seq})
        }
        FrameInfo::PathChallenge => json!({"frame_type": "path_challenge"}),
        FrameInfo::PathResponse => json!({"frame_type": "path_response"}),
        FrameInfo::ConnectionClose {
            application,
            error_code,
            frame_type,
            reason_len: _,
        } => {
            let mut m = Map::new();
            m.insert("frame_type".into(), "connection_close".into());
            if *application {
                m.insert("error_space".into(), "application".into());
                m.insert("error".into(), "unknown".into());
                m.insert("error_code".into(), (*error_code).into());
            } else {
                m.insert("error_space".into(), "transport".into());
                let (name, unknown) = transport_error(*error_code);
                m.insert("error".into(), name.into());
                if unknown {
                    m.insert("error_code".into(), (*error_code).into());
                }
                if let Some(ft) = frame_type {
                    m.insert("trigger_frame_type".into(), (*ft).into());
                }
            }
            Value::Object(m)
        }
        FrameInfo::HandshakeDone => json!({"frame_type": "handshake_done"}),
        FrameInfo::Datagram { len } => json!({"frame_type": "datagram", "raw": {"length": len}}),
        FrameInfo::AckFrequency {
            seq,
            ack_eliciting_threshold,
            request_max_ack_delay,
            reordering_threshold,
        } => {
            // Field names of draft-ietf-quic-ack-frequency; the delay in microseconds.
            let mut m = serde_json::Map::new();
            m.insert("frame_type".into(), "ack_frequency".into());
            m.insert("sequence_number".into(), (*seq).into());
            for (k, v) in [
                ("ack_eliciting_threshold", ack_eliciting_threshold),
                ("request_max_ack_delay", request_max_ack_delay),
                ("reordering_threshold", reordering_threshold),
            ] {
                if let Some(v) = v {
                    m.insert(k.into(), (*v).into());
                }
            }
            Value::Object(m)
        }
        FrameInfo::ImmediateAck => json!({"frame_type": "immediate_ack"}),
        FrameInfo::Extension { ty, len } => json!({
            "frame_type": "unknown", "frame_type_bytes": ty, "raw": {"payload_length": len},
        }),
        // A frame kind this mapping does not know yet.
        _ => json!({"frame_type": "unknown", "frame_type_bytes": 0}),
    }
}

/// qlog's name of a transport error code, and whether it is "unknown" (then the code goes
/// in `error_code`). CRYPTO_ERROR codes use the `crypto_error_0x1XX` form.
fn transport_error(code: u64) -> (String, bool) {
    let name = match code {
        error_code::NO_ERROR => "no_error",
        error_code::INTERNAL_ERROR => "internal_error",
        0x02 => "connection_refused",
        0x03 => "flow_control_error",
        0x04 => "stream_limit_error",
        0x05 => "stream_state_error",
        0x06 => "final_size_error",
        0x07 => "frame_encoding_error",
        0x08 => "transport_parameter_error",
        0x09 => "connection_id_limit_error",
        0x0a => "protocol_violation",
        0x0b => "invalid_token",
        0x0c => "application_error",
        0x0d => "crypto_buffer_exceeded",
        0x0e => "key_update_error",
        0x0f => "aead_limit_reached",
        0x10 => "no_viable_path",
        0x100..=0x1ff => return (format!("crypto_error_0x{code:03x}"), false),
        _ => return ("unknown".into(), true),
    };
    (name.into(), false)
}

fn closed(e: &ConnectionError) -> Map<String, Value> {
    let mut m = Map::new();
    let transport = |m: &mut Map<String, Value>, code: u64| {
        let (name, unknown) = transport_error(code);
        m.insert("connection_error".into(), name.into());
        if unknown {
            m.insert("error_code".into(), code.into());
        }
    };
    let trigger = match e {
        ConnectionError::TransportError(t) => {
            transport(&mut m, t.code);
            m.insert("reason".into(), t.reason.to_string().into());
            "error"
        }
        ConnectionError::ConnectionClosed { code, reason, .. } => {
            transport(&mut m, *code);
            m.insert("reason".into(), reason.clone().into());
            "error"
        }
        ConnectionError::ApplicationClosed { code, reason } => {
            m.insert("application_error".into(), "unknown".into());
            m.insert("error_code".into(), (*code).into());
            m.insert("reason".into(), reason.clone().into());
            "application"
        }
        ConnectionError::LocallyClosed => "application",
        ConnectionError::TimedOut => "idle_timeout",
        ConnectionError::Reset => "stateless_reset",
        ConnectionError::VersionMismatch => "version_mismatch",
    };
    m.insert("trigger".into(), trigger.into());
    m
}

fn parameters(p: &TransportParameters) -> Map<String, Value> {
    let mut m = Map::new();
    let cid = |c: &Option<qfec_proto::ConnectionId>| c.map(|c| Value::from(c.to_string()));
    for (k, v) in [
        (
            "original_destination_connection_id",
            cid(&p.original_destination_connection_id),
        ),
        (
            "initial_source_connection_id",
            cid(&p.initial_source_connection_id),
        ),
        (
            "retry_source_connection_id",
            cid(&p.retry_source_connection_id),
        ),
        (
            "stateless_reset_token",
            p.stateless_reset_token.map(|t| hex(&t).into()),
        ),
        (
            "max_datagram_frame_size",
            p.max_datagram_frame_size.map(Value::from),
        ),
    ] {
        if let Some(v) = v {
            m.insert(k.into(), v);
        }
    }
    for (k, v) in [
        ("max_idle_timeout", p.max_idle_timeout),
        ("max_udp_payload_size", p.max_udp_payload_size),
        ("ack_delay_exponent", p.ack_delay_exponent),
        ("max_ack_delay", p.max_ack_delay),
        ("active_connection_id_limit", p.active_connection_id_limit),
        ("initial_max_data", p.initial_max_data),
        (
            "initial_max_stream_data_bidi_local",
            p.initial_max_stream_data_bidi_local,
        ),
        (
            "initial_max_stream_data_bidi_remote",
            p.initial_max_stream_data_bidi_remote,
        ),
        ("initial_max_stream_data_uni", p.initial_max_stream_data_uni),
        ("initial_max_streams_bidi", p.initial_max_streams_bidi),
        ("initial_max_streams_uni", p.initial_max_streams_uni),
    ] {
        m.insert(k.into(), v.into());
    }
    m.insert(
        "disable_active_migration".into(),
        p.disable_active_migration.into(),
    );
    if !p.extensions.is_empty() {
        let unknown: Vec<Value> = p
            .extensions
            .iter()
            .map(|(id, v)| json!({"id": id, "value": hex(v)}))
            .collect();
        m.insert("unknown_parameters".into(), unknown.into());
    }
    m
}

fn metrics(r: &RecoveryMetrics) -> Value {
    let mut m = Map::new();
    let mut d = |k: &str, v: Option<Duration>| {
        if let Some(v) = v {
            m.insert(k.into(), dur_ms(v).into());
        }
    };
    d("min_rtt", r.min_rtt);
    d("smoothed_rtt", r.smoothed_rtt);
    d("latest_rtt", r.latest_rtt);
    d("rtt_variance", r.rtt_variance);
    for (k, v) in [
        ("pto_count", r.pto_count.map(u64::from)),
        ("congestion_window", r.congestion_window),
        ("bytes_in_flight", r.bytes_in_flight),
        ("ssthresh", r.ssthresh),
        // qlog wants bits per second.
        ("pacing_rate", r.pacing_rate.map(|b| b.saturating_mul(8))),
    ] {
        if let Some(v) = v {
            m.insert(k.into(), v.into());
        }
    }
    Value::Object(m)
}

fn key(key_type: &str, key_phase: Option<u64>, trigger: &str) -> Value {
    let mut m = json!({"key_type": key_type, "trigger": trigger});
    if let Some(p) = key_phase {
        m["key_phase"] = p.into();
    }
    m
}
