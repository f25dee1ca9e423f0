//! qfec-lab: scenarios, presets, workloads, metrics and campaigns for the qfec laboratory.
//!
//! This crate knows nothing about QUIC. A scenario file (TOML, see [`config`]) resolves into a
//! [`Scenario`]: two [`qfec_sim::LinkSpec`] directions, a [`Workload`], [`ProtocolSettings`] and
//! seeds. A [`Sweep`] expands scenarios x presets x losses x variants x seeds into
//! [`RunSpec`]s; [`run_all`] executes them with any `Fn(&RunSpec) -> RunRecord` on worker
//! threads; [`aggregate`] and the writers in [`output`] turn the records into tables.

pub mod campaign;
pub mod config;
pub mod design;
pub mod metrics;
pub mod output;
pub mod pages;
pub mod presets;
pub mod scenario;
pub mod units;
pub mod workload;

pub use campaign::{RunSpec, Sweep, Variant, run_all};
pub use config::{CongestionName, FecCcMode, ProtocolSettings};
pub use metrics::{RunRecord, Stats, Summary, aggregate, jain_index};
pub use pages::PageModel;
pub use presets::{LinkPair, PRESETS, Preset};
pub use scenario::{Scenario, ScenarioError};
pub use units::{parse_duration, parse_rate, parse_ratio, parse_size};
pub use workload::{RealtimeSpec, Workload};
