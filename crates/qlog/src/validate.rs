//! Checks a JSON-SEQ qlog file against the required fields of the drafts in `shared/refs`
//! (main schema: `QlogFileSeq`, `TraceSeq`, `VantagePoint`, `Event`; QUIC events: each
//! event's data, `PacketHeader` and the QUIC frames), and the types and enumerations of the
//! fields it recognises. Fields the drafts leave open (extension points) are not judged.
//! Used by the tests of this crate, the lab and the command-line program.

use serde_json::Value;

/// Where a file breaks the schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("record {record}: {message}")]
pub struct ValidationError {
    /// 0 is the header record.
    pub record: usize,
    pub message: String,
}

/// A valid file's records.
#[derive(Debug, Clone, PartialEq)]
pub struct QlogFile {
    pub header: Value,
    pub events: Vec<Value>,
}

impl QlogFile {
    /// The trace's vantage point type.
    pub fn vantage(&self) -> Option<&str> {
        self.header
            .pointer("/trace/vantage_point/type")
            .and_then(Value::as_str)
    }

    /// The events named `name`.
    pub fn named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.events
            .iter()
            .filter(move |e| e.get("name").and_then(Value::as_str) == Some(name))
    }
}

/// Splits a JSON-SEQ text into its records (RFC 7464: each starts with 0x1E).
pub fn records(bytes: &[u8]) -> Result<Vec<Value>, ValidationError> {
    if bytes.first() != Some(&crate::RS) {
        return Err(err(
            0,
            "the file does not start with a record separator (0x1E)",
        ));
    }
    bytes[1..]
        .split(|b| *b == crate::RS)
        .enumerate()
        .map(|(i, r)| {
            if !r.ends_with(b"\n") {
                return Err(err(i, "record does not end with a line feed"));
            }
            serde_json::from_slice(r).map_err(|e| err(i, &format!("not JSON: {e}")))
        })
        .collect()
}

/// Parses and checks a whole file.
pub fn validate(bytes: &[u8]) -> Result<QlogFile, ValidationError> {
    let mut recs = records(bytes)?;
    if recs.is_empty() {
        return Err(err(0, "no header record"));
    }
    let header = recs.remove(0);
    check_header(&header).map_err(|m| err(0, &m))?;
    for (i, e) in recs.iter().enumerate() {
        check_event(e).map_err(|m| err(i + 1, &m))?;
    }
    Ok(QlogFile {
        header,
        events: recs,
    })
}

fn err(record: usize, message: &str) -> ValidationError {
    ValidationError {
        record,
        message: message.to_string(),
    }
}

type Check = Result<(), String>;

fn obj<'a>(v: &'a Value, what: &str) -> Result<&'a serde_json::Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| format!("{what} is not an object"))
}

fn text(m: &serde_json::Map<String, Value>, k: &str, what: &str) -> Result<String, String> {
    m.get(k)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| format!("{what}: required text field {k:?} missing"))
}

fn one_of(m: &serde_json::Map<String, Value>, k: &str, allowed: &[&str], required: bool) -> Check {
    match m.get(k) {
        None if !required => Ok(()),
        None => Err(format!("required field {k:?} missing")),
        Some(Value::String(s)) if allowed.contains(&s.as_str()) => Ok(()),
        Some(v) => Err(format!("{k:?} = {v} is not one of {allowed:?}")),
    }
}

fn uint(m: &serde_json::Map<String, Value>, k: &str, required: bool) -> Check {
    match m.get(k) {
        None if !required => Ok(()),
        None => Err(format!("required uint field {k:?} missing")),
        Some(v) if v.is_u64() => Ok(()),
        Some(v) => Err(format!("{k:?} = {v} is not an unsigned integer")),
    }
}

fn number(m: &serde_json::Map<String, Value>, k: &str, required: bool) -> Check {
    match m.get(k) {
        None if !required => Ok(()),
        None => Err(format!("required number field {k:?} missing")),
        Some(v) if v.is_number() => Ok(()),
        Some(v) => Err(format!("{k:?} = {v} is not a number")),
    }
}

fn hexstring(m: &serde_json::Map<String, Value>, k: &str) -> Check {
    match m.get(k) {
        None => Ok(()),
        Some(Value::String(s)) if s.chars().all(|c| c.is_ascii_hexdigit()) => Ok(()),
        Some(v) => Err(format!("{k:?} = {v} is not a hexstring")),
    }
}

fn present(m: &serde_json::Map<String, Value>, k: &str) -> Check {
    m.contains_key(k)
        .then_some(())
        .ok_or_else(|| format!("required field {k:?} missing"))
}

/// `QlogFileSeq` with its `TraceSeq`.
fn check_header(h: &Value) -> Check {
    let m = obj(h, "header")?;
    let schema = text(m, "file_schema", "header")?;
    if schema != crate::FILE_SCHEMA_SEQ {
        return Err(format!(
            "file_schema {schema:?} is not the sequential schema"
        ));
    }
    let format = text(m, "serialization_format", "header")?;
    if !format.eq_ignore_ascii_case(crate::SERIALIZATION_FORMAT) {
        return Err(format!("serialization_format {format:?}"));
    }
    let trace = obj(
        m.get("trace")
            .ok_or("header: required field \"trace\" missing")?,
        "trace",
    )?;
    let schemas = trace
        .get("event_schemas")
        .and_then(Value::as_array)
        .ok_or("trace: required field \"event_schemas\" missing")?;
    if schemas.is_empty() || !schemas.iter().all(Value::is_string) {
        return Err("trace.event_schemas must be a non-empty array of text".into());
    }
    if let Some(vp) = trace.get("vantage_point") {
        let vp = obj(vp, "vantage_point")?;
        one_of(
            vp,
            "type",
            &["client", "server", "network", "unknown"],
            true,
        )?;
    }
    if let Some(cf) = trace.get("common_fields") {
        let cf = obj(cf, "common_fields")?;
        one_of(
            cf,
            "time_format",
            &["relative_to_epoch", "relative_to_previous_event"],
            false,
        )?;
        if let Some(rt) = cf.get("reference_time") {
            let rt = obj(rt, "reference_time")?;
            present(rt, "clock_type")?;
            let epoch = text(rt, "epoch", "reference_time")?;
            if rt.get("clock_type").and_then(Value::as_str) == Some("monotonic")
                && epoch != "unknown"
            {
                return Err("a monotonic reference clock must have epoch \"unknown\"".into());
            }
        }
    }
    Ok(())
}

const PACKET_TYPES: &[&str] = &[
    "initial",
    "handshake",
    "0RTT",
    "1RTT",
    "retry",
    "version_negotiation",
    "stateless_reset",
    "unknown",
];

const KEY_TYPES: &[&str] = &[
    "server_initial_secret",
    "client_initial_secret",
    "server_handshake_secret",
    "client_handshake_secret",
    "server_0rtt_secret",
    "client_0rtt_secret",
    "server_1rtt_secret",
    "client_1rtt_secret",
];

fn check_packet_header(v: &Value) -> Check {
    let h = obj(v, "header")?;
    one_of(h, "packet_type", PACKET_TYPES, true)?;
    if h.get("packet_type").and_then(Value::as_str) == Some("unknown") {
        uint(h, "packet_type_bytes", false)?;
    }
    uint(h, "packet_number", false)?;
    uint(h, "key_phase", false)?;
    uint(h, "length", false)?;
    hexstring(h, "scid")?;
    hexstring(h, "dcid")?;
    hexstring(h, "version")?;
    Ok(())
}

fn check_raw(m: &serde_json::Map<String, Value>, required: bool) -> Check {
    match m.get("raw") {
        None if !required => Ok(()),
        None => Err("required field \"raw\" missing".into()),
        Some(r) => {
            let r = obj(r, "raw")?;
            uint(r, "length", false)?;
            uint(r, "payload_length", false)?;
            hexstring(r, "data")
        }
    }
}

/// A `$QuicFrame`: the base frames' required fields.
fn check_frame(v: &Value) -> Check {
    let f = obj(v, "frame")?;
    let ty = text(f, "frame_type", "frame")?;
    let r = match ty.as_str() {
        "padding" | "ping" | "handshake_done" | "datagram" => check_raw(f, false),
        "ack" => {
            number(f, "ack_delay", false)?;
            if let Some(rs) = f.get("acked_ranges") {
                let ok = rs.as_array().is_some_and(|rs| {
                    !rs.is_empty()
                        && rs.iter().all(|r| {
                            r.as_array().is_some_and(|a| {
                                (1..=2).contains(&a.len()) && a.iter().all(Value::is_u64)
                            })
                        })
                });
                if !ok {
                    return Err(format!("ack: acked_ranges {rs} malformed"));
                }
            }
            ["ect0", "ect1", "ce"]
                .iter()
                .try_for_each(|k| uint(f, k, false))
        }
        "reset_stream" => {
            uint(f, "stream_id", true)?;
            present(f, "error")?;
            uint(f, "final_size", true)
        }
        "stop_sending" => {
            uint(f, "stream_id", true)?;
            present(f, "error")
        }
        "crypto" => {
            uint(f, "offset", true)?;
            check_raw(f, true)?;
            // "The length field of the Crypto frame MUST be logged in raw.length".
            uint(obj(&f["raw"], "raw")?, "length", true)
        }
        "new_token" => present(f, "token"),
        "stream" => {
            uint(f, "stream_id", true)?;
            uint(f, "offset", false)?;
            check_raw(f, false)
        }
        "max_data" => uint(f, "maximum", true),
        "max_stream_data" => {
            uint(f, "stream_id", true)?;
            uint(f, "maximum", true)
        }
        "max_streams" | "streams_blocked" => {
            one_of(f, "stream_type", &["unidirectional", "bidirectional"], true)?;
            uint(
                f,
                if ty == "max_streams" {
                    "maximum"
                } else {
                    "limit"
                },
                true,
            )
        }
        "data_blocked" => uint(f, "limit", true),
        "stream_data_blocked" => {
            uint(f, "stream_id", true)?;
            uint(f, "limit", true)
        }
        "new_connection_id" => {
            uint(f, "sequence_number", true)?;
            uint(f, "retire_prior_to", true)?;
            present(f, "connection_id")?;
            hexstring(f, "connection_id")
        }
        "retire_connection_id" => uint(f, "sequence_number", true),
        "path_challenge" | "path_response" => hexstring(f, "data"),
        "connection_close" => {
            one_of(f, "error_space", &["transport", "application"], false)?;
            uint(f, "error_code", false)
        }
        "unknown" => uint(f, "frame_type_bytes", true),
        // Frames of extensions ($QuicFrame is any map with a frame_type).
        _ => Ok(()),
    };
    r.map_err(|m| format!("{ty} frame: {m}"))
}

fn check_frames(d: &serde_json::Map<String, Value>) -> Check {
    match d.get("frames") {
        None => Ok(()),
        Some(Value::Array(fs)) => fs.iter().try_for_each(check_frame),
        Some(v) => Err(format!("frames = {v} is not an array")),
    }
}

fn check_event(e: &Value) -> Check {
    let m = obj(e, "event")?;
    number(m, "time", true)?;
    let name = text(m, "name", "event")?;
    let Some((namespace, ty)) = name.split_once(':') else {
        return Err(format!("name {name:?} is not namespace:event"));
    };
    if namespace.is_empty() || ty.is_empty() {
        return Err(format!("name {name:?} is not namespace:event"));
    }
    if let Some(t) = m.get("tuple")
        && !t.is_string()
    {
        return Err(format!("tuple = {t} is not a string (TupleID)"));
    }
    let d = obj(
        m.get("data").ok_or("required field \"data\" missing")?,
        "data",
    )?;
    if namespace != "quic" {
        return Ok(());
    }
    let r = match ty {
        "packet_sent" | "packet_received" => {
            check_packet_header(d.get("header").ok_or("required field \"header\" missing")?)?;
            check_frames(d)?;
            check_raw(d, false)?;
            hexstring(d, "stateless_reset_token")?;
            if ty == "packet_sent" {
                if d.get("is_mtu_probe_packet")
                    .is_some_and(|v| !v.is_boolean())
                {
                    return Err("\"is_mtu_probe_packet\" is not a boolean".into());
                }
                one_of(
                    d,
                    "trigger",
                    &[
                        "retransmit_reordered",
                        "retransmit_timeout",
                        "pto_probe",
                        "retransmit_crypto",
                        "cc_bandwidth_probe",
                    ],
                    false,
                )
            } else {
                one_of(d, "trigger", &["keys_available"], false)
            }
        }
        "packet_dropped" => {
            if let Some(h) = d.get("header") {
                check_packet_header(h)?;
            }
            check_raw(d, false)?;
            one_of(
                d,
                "trigger",
                &[
                    "internal_error",
                    "rejected",
                    "unsupported",
                    "invalid",
                    "duplicate",
                    "connection_unknown",
                    "decryption_failure",
                    "key_unavailable",
                    "general",
                ],
                false,
            )
        }
        "packet_buffered" => {
            if let Some(h) = d.get("header") {
                check_packet_header(h)?;
            }
            one_of(d, "trigger", &["backpressure", "keys_unavailable"], false)
        }
        "packet_lost" => {
            if let Some(h) = d.get("header") {
                check_packet_header(h)?;
            }
            check_frames(d)?;
            one_of(
                d,
                "trigger",
                &["reordering_threshold", "time_threshold", "pto_expired"],
                false,
            )
        }
        "packets_acked" => {
            one_of(
                d,
                "packet_number_space",
                &["initial", "handshake", "application_data"],
                false,
            )?;
            match d.get("packet_numbers") {
                None => Ok(()),
                Some(Value::Array(a)) if !a.is_empty() && a.iter().all(Value::is_u64) => Ok(()),
                Some(v) => Err(format!("packet_numbers = {v}")),
            }
        }
        "recovery_metrics_updated" => {
            for k in ["min_rtt", "smoothed_rtt", "latest_rtt", "rtt_variance"] {
                number(d, k, false)?;
            }
            for k in [
                "pto_count",
                "congestion_window",
                "bytes_in_flight",
                "ssthresh",
                "packets_in_flight",
                "pacing_rate",
            ] {
                uint(d, k, false)?;
            }
            if d.is_empty() {
                return Err("recovery_metrics_updated without any metric".into());
            }
            Ok(())
        }
        "congestion_state_updated" | "connection_state_updated" => {
            text(d, "new", ty)?;
            Ok(())
        }
        "mtu_updated" => {
            uint(d, "old", false)?;
            uint(d, "new", true)
        }
        "ecn_state_updated" => {
            let states = &["testing", "unknown", "failed", "capable"];
            one_of(d, "old", states, false)?;
            one_of(d, "new", states, true)
        }
        "key_updated" | "key_discarded" => {
            one_of(d, "key_type", KEY_TYPES, true)?;
            uint(d, "key_phase", false)?;
            one_of(
                d,
                "trigger",
                &["tls", "remote_update", "local_update"],
                false,
            )
        }
        "connection_closed" => {
            one_of(d, "initiator", &["local", "remote"], false)?;
            uint(d, "error_code", false)?;
            one_of(
                d,
                "trigger",
                &[
                    "idle_timeout",
                    "application",
                    "error",
                    "version_mismatch",
                    "stateless_reset",
                    "aborted",
                    "unspecified",
                ],
                false,
            )
        }
        "parameters_set" => {
            one_of(d, "initiator", &["local", "remote"], false)?;
            for k in [
                "original_destination_connection_id",
                "initial_source_connection_id",
                "retry_source_connection_id",
                "stateless_reset_token",
            ] {
                hexstring(d, k)?;
            }
            for k in [
                "max_idle_timeout",
                "max_udp_payload_size",
                "ack_delay_exponent",
                "max_ack_delay",
                "active_connection_id_limit",
                "initial_max_data",
                "initial_max_stream_data_bidi_local",
                "initial_max_stream_data_bidi_remote",
                "initial_max_stream_data_uni",
                "initial_max_streams_bidi",
                "initial_max_streams_uni",
                "max_datagram_frame_size",
            ] {
                uint(d, k, false)?;
            }
            match d.get("unknown_parameters") {
                None => Ok(()),
                Some(Value::Array(ps)) => ps.iter().try_for_each(|p| {
                    let p = obj(p, "unknown parameter")?;
                    uint(p, "id", true)?;
                    hexstring(p, "value")
                }),
                Some(v) => Err(format!("unknown_parameters = {v}")),
            }
        }
        "version_information" => {
            for k in ["server_versions", "client_versions"] {
                match d.get(k) {
                    None => {}
                    Some(Value::Array(a))
                        if !a.is_empty()
                            && a.iter().all(|v| {
                                v.as_str()
                                    .is_some_and(|s| s.chars().all(|c| c.is_ascii_hexdigit()))
                            }) => {}
                    Some(v) => return Err(format!("{k} = {v}")),
                }
            }
            hexstring(d, "chosen_version")
        }
        // Other quic events: the abstract Event's fields were checked.
        _ => Ok(()),
    };
    r.map_err(|m| format!("{name}: {m}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(records: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        for r in records {
            out.push(crate::RS);
            out.extend_from_slice(r.as_bytes());
            out.push(b'\n');
        }
        out
    }

    const HEADER: &str = r#"{"file_schema":"urn:ietf:params:qlog:file:sequential","serialization_format":"application/qlog+json-seq","trace":{"event_schemas":["urn:ietf:params:qlog:events:quic-13"],"vantage_point":{"type":"client"}}}"#;

    #[test]
    fn accepts_a_minimal_file_and_rejects_missing_required_fields() {
        let ok = file(&[
            HEADER,
            r#"{"time":1.5,"name":"quic:packet_sent","data":{"header":{"packet_type":"1RTT","packet_number":3},"frames":[{"frame_type":"stream","stream_id":0,"raw":{"length":10}}]}}"#,
        ]);
        let f = validate(&ok).unwrap();
        assert_eq!(f.vantage(), Some("client"));
        assert_eq!(f.named("quic:packet_sent").count(), 1);

        let bad = [
            // no header in packet_sent
            r#"{"time":1,"name":"quic:packet_sent","data":{}}"#,
            // crypto frame without raw.length
            r#"{"time":1,"name":"quic:packet_received","data":{"header":{"packet_type":"initial"},"frames":[{"frame_type":"crypto","offset":0}]}}"#,
            // no time
            r#"{"name":"quic:packet_lost","data":{}}"#,
            // unknown key type
            r#"{"time":1,"name":"quic:key_updated","data":{"key_type":"x"}}"#,
            // no "new"
            r#"{"time":1,"name":"quic:connection_state_updated","data":{"old":"attempted"}}"#,
        ];
        for b in bad {
            assert!(validate(&file(&[HEADER, b])).is_err(), "accepted {b}");
        }
        assert!(validate(b"{}\n").is_err(), "no record separator");
        assert!(validate(&file(&[r#"{"trace":{}}"#])).is_err(), "bad header");
    }
}
