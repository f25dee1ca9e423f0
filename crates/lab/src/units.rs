//! Units in scenario files and on the command line: rates, durations, sizes, ratios.
//!
//! Each `parse_*` returns a one-line error that the CLI can print as is. The serde newtypes
//! ([`Rate`], [`Dur`], [`Size`], [`Ratio`]) accept either a string with a unit or a bare number
//! where a bare number is unambiguous, and reuse the same parsers, so a scenario file and a
//! command-line flag understand exactly the same spellings.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// Split "1.5 Mb/s" into (1.5, "Mb/s").
fn split_number(s: &str) -> Result<(f64, &str), String> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '_' | '-' | '+')))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    let num = num.replace('_', "");
    let v: f64 = num
        .parse()
        .map_err(|_| format!("expected a number followed by a unit, got {s:?}"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("must be a non-negative number, got {s:?}"));
    }
    Ok((v, unit.trim()))
}

/// A rate in bits per second: "20Mbps", "1.5 Mb/s", "468kbps", "10 Gbit/s", "800bps".
/// Prefixes are decimal (k = 1000). Byte rates ("MB/s") are refused to avoid factor-8 slips.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let (v, unit) = split_number(s)?;
    let (prefix, rest) = match unit.chars().next() {
        Some('k' | 'K') => (1e3, &unit[1..]),
        Some('M') => (1e6, &unit[1..]),
        Some('G') => (1e9, &unit[1..]),
        _ => (1.0, unit),
    };
    match rest {
        "bps" | "b/s" | "bit/s" | "bits/s" | "bit" => Ok((v * prefix).round() as u64),
        "Bps" | "B/s" => Err(format!(
            "rates are in bits per second (e.g. \"20Mbps\"), got bytes in {s:?}"
        )),
        "" => Err(format!(
            "missing unit in rate {s:?} (e.g. \"20Mbps\", \"468kbps\")"
        )),
        _ => Err(format!(
            "unknown rate unit {unit:?} in {s:?} (use bps, kbps, Mbps, Gbps)"
        )),
    }
}

/// A duration: "15ms", "1.2s", "250us", "100ns", "2min", "1h".
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let (v, unit) = split_number(s)?;
    let scale = match unit {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" | "sec" => 1.0,
        "min" => 60.0,
        "h" => 3600.0,
        "" => {
            return Err(format!(
                "missing unit in duration {s:?} (e.g. \"15ms\", \"1.2s\")"
            ));
        }
        _ => {
            return Err(format!(
                "unknown duration unit {unit:?} in {s:?} (use ns, us, ms, s, min, h)"
            ));
        }
    };
    let secs = v * scale;
    if secs > 1e9 {
        return Err(format!("duration {s:?} is too large"));
    }
    Ok(Duration::from_nanos((secs * 1e9).round() as u64))
}

/// Smallest size that may be written without a unit: below it a bare number is more likely
/// a slip ("20" for "20MB") than a size in bytes, so it is refused ([`check_bare_size`]).
pub const MIN_BARE_SIZE: u64 = 1000;

/// A size written without a unit (`size = 20`, `bulk:20`): refused below [`MIN_BARE_SIZE`]
/// with the spellings that say what is meant.
pub fn check_bare_size(v: u64) -> Result<u64, String> {
    if v > 0 && v < MIN_BARE_SIZE {
        return Err(format!(
            "{v} is {v} bytes; write \"{v}B\" if that is meant, or \"{v}MB\""
        ));
    }
    Ok(v)
}

/// A size in bytes: "20MB", "1776KiB", "1500B", "1 kB", or a bare integer (bytes).
/// kB/MB/GB are decimal, KiB/MiB/GiB binary.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (v, unit) = split_number(s)?;
    let scale: f64 = match unit {
        "" | "B" => 1.0,
        "kB" | "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        u if u.ends_with('b') => {
            return Err(format!("sizes are in bytes (B), got bits in {s:?}"));
        }
        _ => {
            return Err(format!(
                "unknown size unit {unit:?} in {s:?} (use B, kB, MB, GB, KiB, MiB, GiB)"
            ));
        }
    };
    let bytes = v * scale;
    if bytes.fract() != 0.0 {
        return Err(format!("size {s:?} is not a whole number of bytes"));
    }
    Ok(bytes as u64)
}

/// A size as a workload or a scenario's size field takes it: [`parse_size`], and a bare
/// number below [`MIN_BARE_SIZE`] refused ([`check_bare_size`]).
pub fn parse_size_field(s: &str) -> Result<u64, String> {
    let bytes = parse_size(s)?;
    if s.trim().chars().all(|c| c.is_ascii_digit() || c == '_') {
        return check_bare_size(bytes);
    }
    Ok(bytes)
}

/// Exact spelling of a rate with the largest whole unit ("20Mbps", "468kbps", "1500001bps").
pub fn fmt_rate(bps: u64) -> String {
    for (div, unit) in [
        (1_000_000_000, "Gbps"),
        (1_000_000, "Mbps"),
        (1_000, "kbps"),
    ] {
        if bps >= div && bps.is_multiple_of(div) {
            return format!("{}{unit}", bps / div);
        }
    }
    format!("{bps}bps")
}

/// Shortest exact spelling of a duration ("15ms", "1.2s" is "1200ms").
pub fn fmt_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    for (div, unit) in [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")] {
        if ns >= div && ns.is_multiple_of(div) {
            return format!("{}{unit}", ns / div);
        }
    }
    format!("{ns}ns")
}

/// A probability: "2%" or "0.02"; must lie in [0, 1].
pub fn parse_ratio(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = if let Some(p) = t.strip_suffix('%') {
        p.trim()
            .parse::<f64>()
            .map_err(|_| format!("expected a percentage like \"2%\", got {s:?}"))?
            / 100.0
    } else {
        t.parse::<f64>()
            .map_err(|_| format!("expected a ratio like 0.02 or \"2%\", got {s:?}"))?
    };
    if v < 0.0 {
        return Err(format!(
            "must be a non-negative ratio (0 to 1, or 0% to 100%), got {s:?}"
        ));
    }
    check_ratio(v)
}

/// Range check shared by string and numeric ratios.
pub fn check_ratio(v: f64) -> Result<f64, String> {
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("must be between 0 and 1, got {v}"))
    }
}

/// A comma-separated list parsed item by item ("0,1%,2%" with [`parse_ratio`]); the error
/// names the failing item. Empty items are skipped; a list with none is an error.
pub fn parse_list<T>(s: &str, item: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    let v = s
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .enumerate()
        .map(|(i, x)| item(x).map_err(|e| format!("item {}: {e}", i + 1)))
        .collect::<Result<Vec<T>, String>>()?;
    if v.is_empty() {
        return Err(format!("empty list {s:?}: give at least one value"));
    }
    Ok(v)
}

/// Seeds: "7", "1,5,9", or an inclusive range "1..10" / "1-10".
/// Most seeds a campaign may list (each is at least one run).
pub const MAX_SEEDS: u64 = 1_000_000;

pub fn parse_seeds(s: &str) -> Result<Vec<u64>, String> {
    let num = |x: &str| {
        x.trim()
            .parse::<u64>()
            .map_err(|_| format!("expected a seed (non-negative integer), got {x:?}"))
    };
    let t = s.trim();
    if t.starts_with('-') {
        return Err(format!(
            "must be a non-negative seed count, range or list (10, 1-10, 3,7,9), got {s:?}"
        ));
    }
    if let Some((a, b)) = t.split_once("..").or_else(|| t.split_once('-')) {
        let (a, b) = (num(a)?, num(b.trim_start_matches('='))?);
        if b < a {
            return Err(format!("empty seed range {s:?}"));
        }
        if b - a >= MAX_SEEDS {
            return Err(format!(
                "{s:?} is {} seeds: at most {MAX_SEEDS}",
                u128::from(b - a) + 1
            ));
        }
        return Ok((a..=b).collect());
    }
    if t.split(',').all(|x| x.trim().is_empty()) {
        return Err("no seeds given: give a count (10), a range (1-10) or a list (3,7,9)".into());
    }
    let v = parse_list(t, num)?;
    if v.len() as u64 > MAX_SEEDS {
        return Err(format!("{} seeds: at most {MAX_SEEDS}", v.len()));
    }
    let mut seen = std::collections::BTreeSet::new();
    if let Some(d) = v.iter().find(|x| !seen.insert(**x)) {
        return Err(format!(
            "seed {d} is listed twice: each seed runs once, give it once"
        ));
    }
    Ok(v)
}

macro_rules! unit_type {
    ($(#[$m:meta])* $name:ident($inner:ty), $expecting:literal, $parse:expr, $from_u64:expr, $from_f64:expr, $show:expr) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
        pub struct $name(pub $inner);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_str<E: de::Error>(self, s: &str) -> Result<$name, E> {
                        let parse: fn(&str) -> Result<$inner, String> = $parse;
                        parse(s).map($name).map_err(E::custom)
                    }
                    fn visit_i64<E: de::Error>(self, v: i64) -> Result<$name, E> {
                        if v < 0 {
                            return Err(E::custom(format!("must not be negative, got {v}")));
                        }
                        self.visit_u64(v as u64)
                    }
                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<$name, E> {
                        let f: fn(u64) -> Result<$inner, String> = $from_u64;
                        f(v).map($name).map_err(E::custom)
                    }
                    fn visit_f64<E: de::Error>(self, v: f64) -> Result<$name, E> {
                        let f: fn(f64) -> Result<$inner, String> = $from_f64;
                        f(v).map($name).map_err(E::custom)
                    }
                }
                d.deserialize_any(V)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let show: fn(&$inner) -> String = $show;
                s.serialize_str(&show(&self.0))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let show: fn(&$inner) -> String = $show;
                f.write_str(&show(&self.0))
            }
        }
    };
}

unit_type!(
    /// Bits per second ("20Mbps"; a bare number is bits per second).
    Rate(u64),
    "a rate such as \"20Mbps\"",
    parse_rate,
    Ok,
    |v| Ok(v.round() as u64),
    |v| fmt_rate(*v)
);

unit_type!(
    /// A duration ("15ms"; bare numbers are refused because the unit is ambiguous).
    Dur(Duration),
    "a duration such as \"15ms\"",
    parse_duration,
    |v| Err(format!("missing unit in duration {v} (write e.g. \"{v}ms\")")),
    |v| Err(format!("missing unit in duration {v} (write e.g. \"{v}ms\")")),
    |d| fmt_duration(*d)
);

unit_type!(
    /// Bytes ("20MB", "1776KiB"; a bare integer is bytes, from [`MIN_BARE_SIZE`] up).
    Size(u64),
    "a size such as \"20MB\"",
    parse_size_field,
    check_bare_size,
    |v| Err(format!("size {v} is not a whole number of bytes")),
    |v| format!("{v}B")
);

unit_type!(
    /// A probability in [0, 1] ("2%" or 0.02).
    Ratio(f64),
    "a ratio such as 0.02 or \"2%\"",
    parse_ratio,
    |v| check_ratio(v as f64),
    check_ratio,
    |v| format!("{v}")
);

impl Dur {
    pub fn ms(ms: u64) -> Self {
        Dur(Duration::from_millis(ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("20Mbps"), Ok(20_000_000));
        assert_eq!(parse_rate("1.5 Mb/s"), Ok(1_500_000));
        assert_eq!(parse_rate("468kbps"), Ok(468_000));
        assert_eq!(parse_rate("0.468Mbps"), Ok(468_000));
        assert_eq!(parse_rate("10 Gbit/s"), Ok(10_000_000_000));
        assert!(
            parse_rate("20MB/s")
                .unwrap_err()
                .contains("bits per second")
        );
        assert!(parse_rate("20").unwrap_err().contains("missing unit"));
        assert!(parse_rate("fast").unwrap_err().contains("number"));
        for r in [20_000_000, 468_000, 1_890_000, 1_500_001] {
            assert_eq!(parse_rate(&fmt_rate(r)), Ok(r));
        }
        assert_eq!(fmt_rate(1_890_000), "1890kbps");
        assert_eq!(fmt_duration(Duration::from_millis(1200)), "1200ms");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("15ms"), Ok(Duration::from_millis(15)));
        assert_eq!(parse_duration("1.2s"), Ok(Duration::from_millis(1200)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("2min"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("15").unwrap_err().contains("missing unit"));
        assert!(
            parse_duration("15 parsecs")
                .unwrap_err()
                .contains("unknown")
        );
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("20MB"), Ok(20_000_000));
        assert_eq!(parse_size("1776KiB"), Ok(1_818_624));
        assert_eq!(parse_size("1500B"), Ok(1500));
        assert_eq!(parse_size("1 kB"), Ok(1000));
        assert_eq!(parse_size("1500"), Ok(1500));
        assert!(parse_size("10Mb").unwrap_err().contains("bytes"));
        assert!(parse_size("1.5B").is_err());
    }

    #[test]
    fn lists_and_seeds() {
        assert_eq!(
            parse_list("0, 1%,2%", parse_ratio),
            Ok(vec![0.0, 0.01, 0.02])
        );
        assert!(
            parse_list("1%,x", parse_ratio)
                .unwrap_err()
                .starts_with("item 2:")
        );
        assert_eq!(parse_seeds("1..3"), Ok(vec![1, 2, 3]));
        assert_eq!(parse_seeds("4-5"), Ok(vec![4, 5]));
        assert_eq!(parse_seeds("7, 9"), Ok(vec![7, 9]));
        assert!(parse_seeds("5..1").is_err());
        assert!(parse_seeds("a").is_err());
        // Bounded before anything is allocated (a billion seeds aborted with an allocation
        // failure).
        assert_eq!(parse_seeds("1-1000000").map(|v| v.len()), Ok(1_000_000));
        let e = parse_seeds("0-1000000").unwrap_err();
        assert!(e.contains("1000001 seeds: at most 1000000"), "{e}");
        assert!(parse_seeds("0..18446744073709551615").is_err());
    }

    #[test]
    fn ratios() {
        assert_eq!(parse_ratio("2%"), Ok(0.02));
        assert_eq!(parse_ratio("0.02"), Ok(0.02));
        assert!(parse_ratio("150%").unwrap_err().contains("between 0 and 1"));
        assert!(parse_ratio("x").is_err());
    }
}
