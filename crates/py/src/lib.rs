//! `qfec._native`: the lab's campaigns for the Python package (`python/qfec/lab.py`).
//!
//! A [`Plan`] is an experiment resolved into its runs from the options of `qfec lab run`
//! ([`SweepArgs`], as JSON) and an optional scenario (TOML text, or JSON data). Any subset
//! of its runs can be run, on threads, with the GIL released; the records come back as JSON
//! lines, and [`Plan::finish`] orders the records of every run, whoever ran them (a local
//! thread pool, Dask workers, shards), and adds the completion-time ratios, so that the
//! result is the same as one local run. Every run is a function of its seed.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use qfec_lab::campaign::{finished_runs, keep_shard, parse_shard, run_all_until};
use qfec_lab::output::{describe_link, describe_settings, read_jsonl, write_csv, write_jsonl};
use qfec_lab::{PRESETS, RunRecord, RunSpec, Scenario, Sweep, SweepArgs};

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// An experiment resolved into its runs.
#[pyclass(frozen, module = "qfec._native")]
struct Plan {
    sweep: Sweep,
    specs: Vec<RunSpec>,
    /// A run's campaign index -> its position in `specs`.
    position: BTreeMap<usize, usize>,
}

#[pymethods]
impl Plan {
    /// `options`: a JSON object of `qfec lab run`'s options (`preset`, `loss`, `fec_cc`, ...).
    /// `scenario`: a scenario as TOML text (`kind = "toml"`) or as JSON (`"json"`), whose
    /// relative file names resolve in `base_dir`. `shard`: "I/N", only that slice of the
    /// runs.
    #[new]
    #[pyo3(signature = (options, scenario=None, kind="toml", base_dir=".", shard=None))]
    fn new(
        options: &str,
        scenario: Option<&str>,
        kind: &str,
        base_dir: &str,
        shard: Option<&str>,
    ) -> PyResult<Self> {
        let args: SweepArgs = serde_json::from_str(options).map_err(value_error)?;
        let sweep = match scenario {
            None => args.sweep(),
            Some(text) => {
                let toml_text = match kind {
                    "toml" => text.to_string(),
                    "json" => {
                        let v: toml::Value = serde_json::from_str(text).map_err(|e| {
                            value_error(format!(
                                "scenario: {e} (a scenario is a dict of the TOML file's tables)"
                            ))
                        })?;
                        toml::to_string(&v).map_err(|e| value_error(format!("scenario: {e}")))?
                    }
                    other => {
                        return Err(value_error(format!(
                            "scenario kind {other:?}: give \"toml\" or \"json\""
                        )));
                    }
                };
                let s = Scenario::from_toml(&toml_text, "scenario", Path::new(base_dir))
                    .map_err(value_error)?;
                args.sweep_with(s)
            }
        }
        .map_err(value_error)?;
        let mut specs = sweep.runs().map_err(value_error)?;
        if specs.is_empty() {
            return Err(value_error("nothing to run: no seeds"));
        }
        if let Some(shard) = shard {
            let (i, n) = parse_shard(shard).map_err(value_error)?;
            keep_shard(&mut specs, i, n);
        }
        let position = specs
            .iter()
            .enumerate()
            .map(|(p, s)| (s.index, p))
            .collect();
        Ok(Plan {
            sweep,
            specs,
            position,
        })
    }

    fn __len__(&self) -> usize {
        self.specs.len()
    }

    /// The campaign indices of the runs, in order.
    fn indices(&self) -> Vec<usize> {
        self.specs.iter().map(|s| s.index).collect()
    }

    /// One JSON object per run: what it will simulate (identity, links, settings).
    fn describe(&self) -> Vec<String> {
        self.specs
            .iter()
            .map(|s| {
                let mut links = vec![("down", &s.links.down), ("up", &s.links.up)];
                for p in &s.extra_paths {
                    links.push(("path-down", &p.down));
                    links.push(("path-up", &p.up));
                }
                serde_json::json!({
                    "index": s.index,
                    "scenario": s.scenario,
                    "preset": s.preset.clone().unwrap_or_default(),
                    "variant": s.variant,
                    "loss": s.loss,
                    "seed": s.seed,
                    "workload": s.workload.label(),
                    "links": links
                        .iter()
                        .map(|(n, l)| format!("{n}: {}", describe_link(l)))
                        .collect::<Vec<_>>(),
                    "settings": describe_settings(&s.protocol),
                })
                .to_string()
            })
            .collect()
    }

    /// Runs the runs whose campaign indices are `indices` (all when `None`) on `threads`
    /// threads (0: every core), with the GIL released; returns their records as JSON lines,
    /// in the order of the runs. `progress(done, total)` is called as runs finish. Ctrl-C
    /// (a pending signal) stops starting runs and raises KeyboardInterrupt.
    #[pyo3(signature = (indices=None, threads=0, progress=None))]
    fn run(
        &self,
        py: Python<'_>,
        indices: Option<Vec<usize>>,
        threads: usize,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<String> {
        let specs: Vec<RunSpec> = match indices {
            None => self.specs.clone(),
            Some(ix) => ix
                .iter()
                .map(|i| {
                    self.position
                        .get(i)
                        .map(|&p| self.specs[p].clone())
                        .ok_or_else(|| value_error(format!("run {i} is not in this plan")))
                })
                .collect::<PyResult<_>>()?,
        };
        let stop = AtomicBool::new(false);
        let failure: Mutex<Option<PyErr>> = Mutex::new(None);
        let records = py.detach(|| {
            run_all_until(
                &specs,
                threads,
                &stop,
                qfec_lab::quic::run,
                |done, total, _| {
                    // Back in the interpreter for a moment: signals, and the callback.
                    let result = Python::attach(|py| {
                        py.check_signals()?;
                        if let Some(f) = &progress {
                            f.call1(py, (done, total))?;
                        }
                        Ok::<(), PyErr>(())
                    });
                    if let Err(e) = result {
                        stop.store(true, std::sync::atomic::Ordering::Relaxed);
                        failure.lock().unwrap().get_or_insert(e);
                    }
                },
            )
        });
        if let Some(e) = failure.into_inner().unwrap() {
            return Err(e);
        }
        let mut out = Vec::new();
        write_jsonl(&mut out, &records).map_err(value_error)?;
        String::from_utf8(out).map_err(value_error)
    }

    /// The campaign indices of the records in `jsonl` (JSON lines of this plan's records), in
    /// their order; a ValueError names the first record that does not belong to the plan.
    fn finished(&self, jsonl: &str) -> PyResult<Vec<usize>> {
        let records: Vec<RunRecord> = read_jsonl(jsonl).map_err(value_error)?;
        let positions = finished_runs(&self.specs, &records).map_err(value_error)?;
        Ok(positions.iter().map(|&p| self.specs[p].index).collect())
    }

    /// Every run's record, from `jsonl` (JSON lines in any order, e.g. gathered from
    /// workers), in the plan's order, with each FEC variant's completion-time ratio to its
    /// baseline (`xi`): returns (CSV, JSON lines). A ValueError when a run is missing,
    /// twice, or not of this plan.
    fn finish(&self, jsonl: &str) -> PyResult<(String, String)> {
        let records: Vec<RunRecord> = read_jsonl(jsonl).map_err(value_error)?;
        let positions = finished_runs(&self.specs, &records).map_err(value_error)?;
        let mut slots: Vec<Option<RunRecord>> = vec![None; self.specs.len()];
        for (r, p) in records.into_iter().zip(positions) {
            slots[p] = Some(r);
        }
        if let Some(p) = slots.iter().position(Option::is_none) {
            let missing = slots.iter().filter(|s| s.is_none()).count();
            return Err(value_error(format!(
                "{missing} runs have no record (first: run {})",
                self.specs[p].index
            )));
        }
        let mut records: Vec<RunRecord> = slots.into_iter().flatten().collect();
        qfec_lab::metrics::attach_xi(&mut records, &self.sweep.baselines());
        let (mut csv, mut jsonl) = (Vec::new(), Vec::new());
        write_csv(&mut csv, &records).map_err(value_error)?;
        write_jsonl(&mut jsonl, &records).map_err(value_error)?;
        Ok((
            String::from_utf8(csv).map_err(value_error)?,
            String::from_utf8(jsonl).map_err(value_error)?,
        ))
    }
}

/// The link presets as JSON lines: name, source, the ranges the papers give and the values a
/// run uses (the ranges' midpoints), the bulk size, and the WLAN hop when there is one.
#[pyfunction]
fn presets() -> Vec<String> {
    PRESETS
        .iter()
        .map(|p| {
            serde_json::json!({
                "name": p.name,
                "rate_mbps": p.rate_mbps.mid(),
                "rate_mbps_range": [p.rate_mbps.lo, p.rate_mbps.hi],
                "rtt_ms": p.rtt_ms.mid(),
                "rtt_ms_range": [p.rtt_ms.lo, p.rtt_ms.hi],
                "loss": p.default_loss(),
                "loss_range": [p.loss.lo, p.loss.hi],
                "bulk_bytes": p.bulk_bytes,
                "wlan": p.wlan.as_ref().map(|w| w.to_string()),
                "source": p.source,
            })
            .to_string()
        })
        .collect()
}

/// The CSV columns of a runs file, in order: (name, meaning with unit).
#[pyfunction]
fn columns() -> Vec<(&'static str, &'static str)> {
    qfec_lab::output::RECORD_COLUMNS.to_vec()
}

/// The qfec version the records carry.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Plan>()?;
    m.add_function(wrap_pyfunction!(presets, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(columns, m)?)?;
    Ok(())
}
