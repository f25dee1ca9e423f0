//! A short soak (`qfec lab soak` runs the long one): every condition, with and without FEC,
//! each byte checked; and the verdict counts what a run got wrong.

use qfec_lab::soak::{Condition, Verdict, plan};
use qfec_lab::{RunRecord, quic, run_all};

#[test]
fn a_short_soak_delivers_every_byte_once_under_every_condition() {
    let specs = plan(30_000_000, 7);
    assert_eq!(specs.len(), 2 * Condition::ALL.len());
    for c in Condition::ALL {
        for fec in ["none", "rlc"] {
            let v = format!("{}/{fec}", c.name());
            assert!(specs.iter().any(|s| s.variant == v), "no run of {v}");
        }
    }
    assert!(specs.iter().any(|s| !s.extra_paths.is_empty()));
    assert!(specs.iter().any(|s| !s.rebindings.is_empty()));
    let records = run_all(&specs, 0, quic::run, |_, _, _| {});
    let mut total = Verdict::default();
    for (s, r) in specs.iter().zip(&records) {
        let v = Verdict::of(s, r);
        assert!(v.clean(), "{}: {:?} {:?}", s.variant, v, r.error);
        if s.variant.ends_with("/rlc") {
            assert!(r.repair_symbols > 0, "{}: FEC sent no repair", s.variant);
        }
        // The multipath runs used both paths.
        if !s.extra_paths.is_empty() {
            assert_eq!(r.paths.len(), 2, "{}: {:?}", s.variant, r.paths);
            assert!(
                r.paths.iter().all(|p| p.bytes_received > 0),
                "{:?}",
                r.paths
            );
        }
        total.add(v);
    }
    assert!(total.verified >= 30_000_000, "{total:?}");
}

#[test]
fn the_verdict_counts_bad_missing_and_duplicated_bytes() {
    let spec = plan(10_000_000, 1).remove(0);
    let asked = match spec.workload {
        qfec_lab::Workload::Bulk { bytes } => bytes,
        _ => unreachable!(),
    };
    let rec = |app_bytes, completed, error: Option<&str>| RunRecord {
        app_bytes,
        completed,
        error: error.map(String::from),
        ..RunRecord::default()
    };
    let ok = Verdict::of(&spec, &rec(asked, true, None));
    assert!(ok.clean() && ok.verified == asked);
    let short = Verdict::of(&spec, &rec(asked - 10, true, None));
    assert_eq!((short.missing, short.verified), (10, 0));
    assert!(!short.clean());
    let long = Verdict::of(&spec, &rec(asked + 3, true, None));
    assert_eq!((long.duplicated, long.verified), (3, 0));
    let bad = Verdict::of(&spec, &rec(asked, true, Some("stream 0: byte 5 differs")));
    assert_eq!((bad.failed_runs, bad.verified), (1, 0));
    let unfinished = Verdict::of(&spec, &rec(asked, false, None));
    assert_eq!(unfinished.failed_runs, 1);
}
