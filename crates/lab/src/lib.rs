//! qfec-lab: scenarios, presets, workloads, metrics and campaigns for the qfec laboratory.
//!
//! This crate knows nothing about QUIC. A scenario file (TOML, see [`config`]) resolves into a
//! [`Scenario`]: two [`qfec_sim::LinkSpec`] directions, a [`Workload`], [`ProtocolSettings`] and
//! seeds. A [`Sweep`] expands scenarios x presets x losses x variants x seeds into
//! [`RunSpec`]s; [`run_all`] executes them with any `Fn(&RunSpec) -> RunRecord` on worker
//! threads; [`aggregate`] and the writers in [`output`] turn the records into tables.
//!
//! A runner builds a simulator from the spec, installs the links, runs, and fills in the
//! record (here with a constant-bit-rate stand-in where QUIC endpoints will go):
//!
//! ```
//! use std::time::Duration;
//! use qfec_lab::{RunRecord, RunSpec, Scenario, Sweep, aggregate, run_all};
//! use qfec_lab::presets::{client_addr, server_addr};
//! use qfec_sim::{Instant, Simulator, nodes::{CbrSender, Sink}};
//!
//! fn runner(spec: &RunSpec) -> RunRecord {
//!     let mut sim: Simulator = Simulator::new(spec.seed);
//!     let n = spec.workload.total_bytes().div_ceil(1000);
//!     sim.add_node(server_addr(), Box::new(CbrSender::new(client_addr(), 1000, Duration::from_millis(1), n)));
//!     sim.add_node(client_addr(), Box::new(Sink::default()));
//!     let (down, _up) = spec.links.install(&mut sim, server_addr(), client_addr());
//!     sim.run_until_done(Instant::ZERO + spec.duration_limit);
//!     let t = sim.now().as_nanos() as f64 / 1e9;
//!     RunRecord {
//!         completed: true,
//!         completion_time_s: Some(t),
//!         bytes_on_wire: sim.link_stats(down).offered_bytes,
//!         ..spec.record()
//!     }
//! }
//!
//! let text = "preset = \"interop\"\nrepetitions = 2\n[workload]\nkind = \"bulk\"\nsize = \"100kB\"\n";
//! let scenario = Scenario::from_toml(text, "doc.toml", std::path::Path::new(".")).unwrap();
//! let mut sweep = Sweep::new(scenario);
//! sweep.losses = vec![0.0, 0.01];
//! let specs = sweep.runs().unwrap();
//! let records = run_all(&specs, 2, runner, |done, total, _| eprintln!("{done}/{total}"));
//! let table = qfec_lab::output::summary_table(&aggregate(&records));
//! assert_eq!(table.lines().count(), 3 + 2); // two header lines, a rule, a row per loss
//! ```

pub mod args;

/// The git commit this build of qfec came from (`abc1234`, `abc1234-dirty` if its tracked
/// sources differed from it, `unknown` outside a checkout); reproduction reports name it.
pub const BUILD_COMMIT: &str = env!("QFEC_COMMIT");

pub mod campaign;
pub mod charts;
pub mod config;
pub mod design;
pub mod metrics;
pub mod output;
pub mod pages;
pub mod plot;
pub mod presets;
pub mod quic;
pub mod reproduce;
pub mod scenario;
pub mod soak;
pub mod trace;
pub mod units;
pub mod workload;

pub use args::SweepArgs;
pub use campaign::{FlowSpec, MAX_FLOWS, RunSpec, Sweep, Variant, run_all};
pub use config::ProtocolSettings;
pub use metrics::{
    PathRecord, RunRecord, StationRecord, Stats, Summary, WlanRecord, aggregate, jain_index,
};
pub use pages::PageModel;
pub use presets::{LinkPair, PRESETS, Preset, Wlan};
pub use scenario::{Scenario, ScenarioError};
pub use units::{parse_duration, parse_rate, parse_ratio, parse_size};
pub use workload::{Delivery, RealtimeSpec, Workload};

#[cfg(test)]
mod build_commit_tests {
    include!("../commit_label.rs");

    /// Regression: the label said `-dirty` after the tree went back to its commit (the build
    /// script watched the lab's own sources only). The test binary is built from the tree as
    /// it is now, so its label is what git says of the tree now.
    #[test]
    fn the_commit_label_is_the_trees() {
        assert_eq!(super::BUILD_COMMIT, commit_label());
    }
}
