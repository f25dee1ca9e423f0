"""qfec.lab from Python: runs equal the CLI's, a Dask campaign equals a local run, shards
and resume lose and repeat nothing, bad input fails before any run, the GIL is released."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import qfec
from qfec import lab

# Small but not trivial: two losses, a variant without FEC and one with, four seeds.
SPEC = dict(
    preset="wlan",
    loss=[0.01, 0.03],
    fec=["none", "adaptive"],
    seeds=4,
    workload="bulk:1MB",
)

REPO = Path(__file__).resolve().parents[2]


def same_rows(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Equal in every column but the host's time per run."""
    return a.drop(columns="wall_time_s").equals(b.drop(columns="wall_time_s"))


def qfec_binary() -> str | None:
    """The CLI built by cargo (QFEC_BIN, or target/{release,debug}/qfec)."""
    for c in [os.environ.get("QFEC_BIN"), REPO / "target/release/qfec", REPO / "target/debug/qfec"]:
        if c and Path(c).is_file():
            return str(c)
    return None


@pytest.fixture(scope="module")
def local() -> pd.DataFrame:
    return lab.run(**SPEC)


def test_rows_have_the_documented_columns(local: pd.DataFrame) -> None:
    assert list(local.columns) == list(lab.columns())
    assert len(local) == 2 * 2 * 4
    assert local["completed"].all()
    assert (local["error"] == "").all()
    # Every FEC run has its ratio to the run without FEC at the same point and seed.
    fec = local[local["variant"] == "adaptive"]
    base = local[local["variant"] == "none"].set_index(["loss", "seed"])["completion_time_s"]
    want = fec["completion_time_s"].values / base.loc[list(zip(fec["loss"], fec["seed"]))].values
    assert fec["xi"].values == pytest.approx(want)
    assert local[local["variant"] == "none"]["xi"].isna().all()
    assert qfec.__version__


def test_the_same_options_give_the_same_rows(local: pd.DataFrame) -> None:
    assert same_rows(lab.run(**SPEC, threads=1), local)


def test_rows_equal_the_cli(local: pd.DataFrame, tmp_path: Path) -> None:
    exe = qfec_binary()
    if exe is None:
        if os.environ.get("CI") == "true":
            pytest.fail("the qfec binary is missing: cargo build --release -p qfec")
        pytest.skip("the qfec binary is not built")
    out = tmp_path / "runs.csv"
    subprocess.run(
        [exe, "lab", "run", "--preset", "wlan", "--loss", "0.01,0.03", "--fec",
         "none,adaptive", "--seeds", "4", "--workload", "bulk:1MB", "--out", str(out), "-q"],
        check=True,
        capture_output=True,
    )
    assert same_rows(lab._frame(out.read_text()), local)


def test_a_dask_campaign_on_two_workers_equals_the_local_run(
    local: pd.DataFrame, tmp_path: Path
) -> None:
    from dask.distributed import Client, LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, Client(cluster) as client:
        out = tmp_path / "campaign.jsonl"
        # One run per task: the runs really spread over both workers.
        df = lab.campaign(SPEC, client, out=out, chunk=1)
        workers = client.run(lambda: os.getpid())
    assert len(workers) == 2
    assert same_rows(df, local)
    lines = out.read_text().splitlines()
    assert [json.loads(l)["index"] for l in lines] == list(range(len(local)))


def test_shards_together_are_the_whole_run(local: pd.DataFrame) -> None:
    parts = [lab.run(**SPEC, shard=f"{i}/3") for i in (1, 2, 3)]
    assert all(len(p) > 0 for p in parts)
    assert sum(len(p) for p in parts) == len(local)

    def by_run(df: pd.DataFrame) -> pd.DataFrame:
        return df.set_index(["variant", "loss", "seed"]).sort_index()

    # Each shard holds every variant of its points and seeds, so its ratios are complete.
    assert same_rows(by_run(pd.concat(parts)), by_run(local))


def test_an_interrupted_campaign_resumes_without_running_twice(
    local: pd.DataFrame, tmp_path: Path
) -> None:
    out = tmp_path / "c.jsonl"
    first = lab.campaign(SPEC, out=out)
    assert same_rows(first, local)
    lines = out.read_text().splitlines(keepends=True)
    # A crash after 5 runs, in the middle of writing the sixth.
    out.write_text("".join(lines[:5]) + lines[5][:40])
    again = lab.campaign(SPEC, out=out)
    assert same_rows(again, local)
    # The five kept runs were not run again (a run's host time would differ), the rest were.
    kept = first["wall_time_s"].values[:5]
    assert list(again["wall_time_s"].values[:5]) == list(kept)
    assert len(out.read_text().splitlines()) == len(local)
    # Nothing left to run: the file is read back as it is.
    assert same_rows(lab.campaign(SPEC, out=out), local)


def test_records_of_another_campaign_are_refused(tmp_path: Path) -> None:
    out = tmp_path / "c.jsonl"
    lab.campaign(dict(SPEC, seeds=1), out=out)
    other = dict(SPEC, fec=["none", "rlc"], seeds=1)
    with pytest.raises(ValueError, match="another campaign"):
        lab.campaign(other, out=out)


def test_bad_input_fails_before_any_run(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown preset"):
        lab.run(preset="wlna")
    with pytest.raises(ValueError, match="^fec_cc: "):
        lab.run(preset="wlan", fec="rlc", fec_cc="sometimes")
    with pytest.raises(ValueError, match="seeds"):
        lab.run(preset="wlan", seeds="1-1000000000")
    with pytest.raises(ValueError, match="unknown field"):
        lab.campaign(dict(SPEC, fecc="rlc"))
    with pytest.raises(TypeError):
        lab.run(preset="wlan", fecc="rlc")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match=".jsonl"):
        lab.campaign(SPEC, out=tmp_path / "runs.csv")
    with pytest.raises(ValueError, match="no such file"):
        lab.run("missing-scenario.toml")
    with pytest.raises(ValueError, match="chunk=0"):
        lab.campaign(SPEC, chunk=0)
    with pytest.raises(ValueError, match="threads=-1"):
        lab.run(preset="wlan", threads=-1)


def test_a_scenario_as_a_dict_as_text_and_as_a_file(tmp_path: Path) -> None:
    text = 'preset = "interop"\nrepetitions = 2\n[workload]\nkind = "bulk"\nsize = "200kB"\n'
    f = tmp_path / "s.toml"
    f.write_text(text)
    as_file = lab.run(f)
    as_text = lab.run(text)
    as_dict = lab.run(
        {"preset": "interop", "repetitions": 2, "workload": {"kind": "bulk", "size": "200kB"}}
    )
    assert len(as_file) == 2 and as_file["completed"].all()
    assert same_rows(as_text.assign(scenario="x"), as_file.assign(scenario="x"))
    assert same_rows(as_dict.assign(scenario="x"), as_file.assign(scenario="x"))
    # A campaign sends the file's text to its tasks: the same rows as the file run here.
    assert same_rows(lab.campaign(f, chunk=1), as_file)


def test_the_simulator_runs_with_the_gil_released() -> None:
    spec = dict(preset="wlan", loss=0.02, seeds=16, workload="bulk:4MB", threads=1)
    started = time.monotonic()
    lab.run(**spec)
    alone = time.monotonic() - started
    assert alone > 0.05, "too short to tell"
    ticks = 0
    t = threading.Thread(target=lab.run, kwargs=spec)
    t.start()
    while t.is_alive():
        ticks += 1
        time.sleep(0.001)
    t.join()
    # With the GIL held for the whole run, this thread would tick once or twice.
    assert ticks > alone * 1000 / 10, (ticks, alone)


def test_presets_and_plot(local: pd.DataFrame, tmp_path: Path) -> None:
    p = lab.presets()
    assert {"wlan", "4g", "3g", "satellite", "mss", "da2gc"} <= set(p.index)
    assert p.loc["wlan", "loss"] == pytest.approx(sum(p.loc["wlan", "loss_range"]) / 2)
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    two = pd.concat([local, local.assign(preset="other")])
    fig = lab.plot(two, y="completion_time_s", x="loss")
    assert len(fig.axes) == 2
    fig.savefig(tmp_path / "f.png")
    with pytest.raises(ValueError, match="several presets"):
        lab.plot(two, facet=None)


def test_the_example_reproduces_a_figure(tmp_path: Path) -> None:
    """The paper-000 example, cut down (QFEC_EXAMPLE_QUICK): it runs and draws its figure."""
    pytest.importorskip("matplotlib")
    script = Path(__file__).resolve().parents[1] / "examples" / "rquic_fig5.py"
    env = dict(os.environ, QFEC_EXAMPLE_QUICK="1", MPLBACKEND="Agg")
    r = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "fig5.png")],
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "fig5.png").stat().st_size > 10_000
    assert "rquic" in r.stdout
