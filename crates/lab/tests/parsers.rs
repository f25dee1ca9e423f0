//! The lab's own parsers of what people type (units, lists, seeds, workloads, the options
//! of `qfec lab run`) on arbitrary text: they never panic, and what they refuse they refuse
//! with one line that says something.

use proptest::prelude::*;
use qfec_lab::SweepArgs;
use qfec_lab::units::{
    parse_duration, parse_list, parse_rate, parse_ratio, parse_seeds, parse_size, parse_size_field,
};
use qfec_lab::workload::Workload;

/// An error a person reads: not empty, and one line.
fn one_line<T>(what: &str, input: &str, r: Result<T, String>) -> Result<(), TestCaseError> {
    if let Err(e) = r {
        prop_assert!(!e.trim().is_empty(), "{what}({input:?}): empty error");
        prop_assert!(
            !e.contains('\n') && !e.contains('\r'),
            "{what}({input:?}): error of several lines: {e:?}"
        );
    }
    Ok(())
}

/// Text near what people write: digits, units, separators, signs and a few letters, with
/// whitespace and the odd non-ASCII or control character.
fn typed() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9a-zA-Z.,:;%+=_()\\- µ]{0,24}",
        "[0-9]{1,25}(\\.[0-9]{0,5})?(ns|us|ms|s|min|h|bps|kbps|Mbps|Gbps|B|kB|MB|GB|KiB|MiB|GiB|%)?",
        "(bulk|files|page|realtime):[0-9a-zA-Z.,=%\\-\n]{0,20}",
        ".{0,24}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn unit_parsers_never_panic_and_err_in_one_line(s in typed()) {
        one_line("parse_rate", &s, parse_rate(&s))?;
        one_line("parse_duration", &s, parse_duration(&s))?;
        one_line("parse_size", &s, parse_size(&s))?;
        one_line("parse_size_field", &s, parse_size_field(&s))?;
        one_line("parse_ratio", &s, parse_ratio(&s))?;
        one_line("parse_seeds", &s, parse_seeds(&s))?;
        one_line("parse_list", &s, parse_list(&s, parse_ratio))?;
        one_line("Workload::parse", &s, Workload::parse(&s))?;
    }

    /// Every option of `qfec lab run` that takes text, given arbitrary text: the sweep is
    /// built or refused in one line that names the option.
    #[test]
    fn sweep_options_err_in_one_line_naming_the_option(s in typed(), which in 0usize..12) {
        let mut a = SweepArgs {
            preset: Some("mss".into()),
            ..SweepArgs::default()
        };
        let flag = match which {
            0 => { a.loss = Some(s.clone()); "--loss" }
            1 => { a.seeds = Some(s.clone()); "--seeds" }
            2 => { a.fec = Some(s.clone()); "--fec" }
            3 => { a.cc = Some(s.clone()); "--cc" }
            4 => { a.fec = Some("rlc".into()); a.fec_cc = Some(s.clone()); "--fec-cc" }
            5 => { a.rate = Some(s.clone()); "--rate" }
            6 => { a.rtt = Some(s.clone()); "--rtt" }
            7 => { a.queue = Some(s.clone()); "--queue" }
            8 => { a.time_limit = Some(s.clone()); "--time-limit" }
            9 => { a.workload = vec![s.clone()]; "--workload" }
            10 => { a.ack_frequency = Some(s.clone()); "--ack-frequency" }
            _ => { a.preset = Some(s.clone()); "--preset" }
        };
        // (Not expanded with --seeds: a million seeds would be a million runs to hold.)
        let r = a
            .sweep()
            .and_then(|sw| if which == 1 { Ok(()) } else { sw.runs().map(|_| ()) });
        one_line(flag, &s, r.clone())?;
        if let Err(e) = r {
            // --preset's own refusals name it; with no preset at all, the sweep says to give one.
            prop_assert!(
                e.contains(flag) || (flag == "--preset" && e.contains("--preset")),
                "{flag} {s:?}: the error does not name the option: {e}"
            );
        }
    }
}

/// The cases the random text is unlikely to hit: every form of an empty list, and the
/// spellings issue 49 named.
#[test]
fn empty_and_bare_inputs_are_refused_in_one_line() {
    for s in ["", " ", ",", " , ,"] {
        for (what, r) in [
            ("parse_list", parse_list(s, parse_ratio).map(|_| ())),
            ("parse_seeds", parse_seeds(s).map(|_| ())),
        ] {
            let e = r.expect_err(&format!("{what}({s:?}) accepted"));
            assert!(!e.is_empty() && !e.contains('\n'), "{what}({s:?}): {e:?}");
        }
    }
    assert!(parse_size_field("20").unwrap_err().contains("\"20B\""));
    assert_eq!(parse_size_field("20B"), Ok(20));
    assert_eq!(parse_size_field("20000"), Ok(20_000));
    assert!(
        parse_seeds("1,2,1")
            .unwrap_err()
            .contains("seed 1 is listed twice")
    );
    assert!(parse_ratio("-1%").unwrap_err().contains("non-negative"));
}
