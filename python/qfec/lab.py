"""qfec's laboratory: experiments over the deterministic virtual-time simulator.

The keyword arguments are ``qfec lab run``'s options with ``_`` for ``-`` (``fec_cc`` is
``--fec-cc``), and take the same values; a list stands for a comma-separated list
(``fec=["none", "rlc"]`` is ``--fec none,rlc``), a number for itself (``loss=0.02`` is 2 %,
``seeds=10`` is seeds 1 to 10). Errors are ``ValueError`` with the CLI's one-line message,
raised before anything runs.

- :func:`run`: run an experiment here, return a DataFrame (one row per run, the columns of
  :func:`columns`).
- :func:`campaign`: the same runs as tasks on a Dask cluster (or here), written to a JSON
  lines file as they finish, resumed when interrupted; the same rows as :func:`run`.
- :func:`plan`: the runs an experiment resolves to, without running them.
- :func:`presets`, :func:`columns`: the link presets, and what each column means.
- :func:`plot`: a median-against-x figure with matplotlib, one panel per preset.

Every run is a function of its options and seed: the same arguments give the same rows,
whichever machine or worker ran them (all columns but ``wall_time_s``).
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

import pandas as pd

from . import _native

if TYPE_CHECKING:  # pragma: no cover
    import matplotlib.figure

__all__ = ["run", "campaign", "plan", "presets", "columns", "plot", "Plan"]

Plan = _native.Plan

#: A scenario: a TOML file's path, TOML text, or the file's tables as a dict.
Scenario = Union[str, os.PathLike, Mapping[str, Any], None]
#: An option's value: text as on the command line, a number, or a list of either.
Value = Union[str, int, float, Sequence[Union[str, int, float]], range, None]

# The options that repeat on the command line rather than taking a comma-separated list.
_REPEATED = {"workload", "path"}
# The options that are numbers or switches on the command line.
_INTEGER = {"flows", "initial_window", "earlier_connections", "ack_threshold"}
_SWITCH = {"no_pacing", "hystart", "no_path_memory"}
# Options a campaign spec may hold besides run()'s experiment options.
_RUN_ONLY = {"threads", "progress"}


def _text(x: Any) -> str:
    if isinstance(x, bool):
        raise TypeError("a switch is not a value here")
    if isinstance(x, float):
        return repr(x)
    return str(x)


def _options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments -> the JSON object the native plan takes (CLI values)."""
    out: dict[str, Any] = {}
    for name, value in options.items():
        if value is None:
            continue
        if name in _SWITCH:
            if not isinstance(value, bool):
                raise ValueError(f"{name}: give True or False, not {value!r}")
            out[name] = value
        elif name in _INTEGER:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name}: give a whole number, not {value!r}")
            out[name] = value
        elif name in _REPEATED:
            items = [value] if isinstance(value, str) else list(value)
            out[name] = [_text(v) for v in items]
        elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
            out[name] = _text(value)
        elif isinstance(value, (Sequence, range)) and not isinstance(value, (str, bytes)):
            out[name] = ",".join(_text(v) for v in value)
        else:
            raise ValueError(f"{name}: give text, a number or a list, not {value!r}")
    return out


def _python_names(message: str) -> str:
    """The CLI's message with ``--fec-cc`` written as the keyword ``fec_cc``."""
    return re.sub(r"--([a-z][a-z-]*)", lambda m: m.group(1).replace("-", "_"), message)


def _scenario(scenario: Scenario) -> tuple[str | None, str, str, str | None]:
    """(text, kind, base directory, file) for the native plan."""
    if scenario is None:
        return None, "toml", ".", None
    if isinstance(scenario, Mapping):
        return json.dumps(scenario), "json", os.getcwd(), None
    if isinstance(scenario, str) and "\n" in scenario:
        return scenario, "toml", os.getcwd(), None
    path = Path(scenario)
    if not path.is_file():
        raise ValueError(
            f"scenario {str(scenario)!r}: no such file; give a TOML file's path, TOML text or "
            "a dict of its tables"
        )
    return None, "toml", ".", str(path)


def plan(scenario: Scenario = None, *, shard: str | None = None, **options: Value) -> Plan:
    """The runs an experiment resolves to (``qfec lab run --dry-run``), not run.

    ``len(plan(...))`` is the number of runs; ``plan(...).describe()`` gives each run's
    links and settings as JSON. Raises ``ValueError`` for options the CLI would refuse.
    """
    text, kind, base, file = _scenario(scenario)
    opts = _options(options)
    if file is not None:
        opts["scenario"] = file
    try:
        return _native.Plan(json.dumps(opts), text, kind, base, shard)
    except ValueError as e:
        raise ValueError(_python_names(str(e))) from None


def _frame(csv: str) -> pd.DataFrame:
    """The runs' CSV as a DataFrame with the documented columns and types."""
    df = pd.read_csv(io.StringIO(csv), keep_default_na=False, na_values={
        name: [""] for name, _ in _native.columns()
        if name not in ("scenario", "preset", "variant", "workload", "error")
    })
    for name in ("scenario", "preset", "variant", "workload", "error"):
        df[name] = df[name].astype(str)
    df["completed"] = df["completed"].astype(bool)
    return df


class _Progress:
    """A line on stderr at most every few seconds, and one at the end."""

    def __init__(self, enabled: bool, total: int, every: float = 5.0) -> None:
        self.enabled, self.total, self.every = enabled, total, every
        self.start = self.last = time.monotonic()

    def __call__(self, done: int, total: int | None = None) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if done < self.total and now - self.last < self.every:
            return
        self.last = now
        print(
            f"qfec lab: {done}/{self.total} runs, {now - self.start:.0f} s",
            file=sys.stderr,
            flush=True,
        )


def run(
    scenario: Scenario = None,
    *,
    preset: Value = None,
    loss: Value = None,
    workload: Value = None,
    seeds: Value = None,
    cc: Value = None,
    fec: Value = None,
    fec_cc: Value = None,
    flows: int | None = None,
    stagger: str | None = None,
    path: Value = None,
    scheduler: Value = None,
    no_pacing: bool = False,
    hystart: bool = False,
    initial_window: int | None = None,
    earlier_connections: int | None = None,
    no_path_memory: bool = False,
    ack_frequency: Value = None,
    reordering: Value = None,
    ack_threshold: int | None = None,
    max_ack_delay: str | None = None,
    time_limit: str | None = None,
    rate: str | None = None,
    rtt: str | None = None,
    queue: str | None = None,
    shard: str | None = None,
    threads: int = 0,
    progress: bool = False,
) -> pd.DataFrame:
    """Runs an experiment in this process and returns one row per run.

    The arguments are ``qfec lab run``'s (see ``qfec lab run --help``):

    - ``scenario``: a TOML scenario file's path, TOML text, or its tables as a dict;
      without one, ``preset`` names the links (``"wlan"``, ``"4g"``, ``"mss"``, ...; see
      :func:`presets`), a list runs each.
    - ``loss``: loss rates, fractions or ``"2%"``; ``workload``: ``"bulk:20MB"``,
      ``"files:10kB"``, ``"page:flickr"``, ``"realtime:20s"``, a list sweeps them;
      ``seeds``: a count, a range (``"1-20"``, ``range(1, 21)``) or a list.
    - ``cc``, ``fec``, ``fec_cc``, ``ack_frequency``, ``reordering`` (``"fixed"`` or
      ``"adaptive"``), ``scheduler``: a value, or a list
      whose values run as variants of one experiment (``fec=["none", "rlc"]`` adds each FEC
      variant's ratio to ``none``, ``xi``).
    - ``rate``, ``rtt``, ``queue``: override the first path (``"10Mbps"``, ``"80ms"``,
      ``"bdp"``); ``path``: more paths (multipath); ``flows``, ``stagger``: several flows.
    - ``earlier_connections``: a returning client, which made that many connections with
      the same workload before the measured one (the endpoints remember the path;
      ``no_path_memory=True`` makes them forget it, the control).
    - ``shard``: ``"I/N"``, only that slice (every variant of a point and seed together).
    - ``threads``: worker threads (0: every core); ``progress``: a line on stderr every
      few seconds.

    The columns are :func:`columns`'s; ``xi`` is filled when the experiment ran
    a variant without FEC beside FEC variants. Ctrl-C stops the runs (KeyboardInterrupt).
    """
    options = {k: v for k, v in locals().items() if k not in ("scenario", "shard", "threads", "progress")}
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise ValueError(f"threads={threads!r}: give 0 (every core) or a number of threads")
    p = plan(scenario, shard=shard, **options)
    bar = _Progress(progress, len(p))
    jsonl = p.run(None, threads, bar if progress else None)
    csv, _ = p.finish(jsonl)
    return _frame(csv)


def _run_chunk(payload: str, indices: list[int], threads: int) -> str:
    """A campaign's task: the records (JSON lines) of the runs `indices`. Runs on a worker."""
    args = json.loads(payload)
    p = _native.Plan(args["options"], args["text"], args["kind"], args["base"], args["shard"])
    return p.run(indices, threads, None)


def _read_journal(path: Path) -> str:
    """The complete lines of a campaign's JSON lines file ("" when there is none): a line cut
    short by a crash is dropped (its run runs again)."""
    if not path.exists():
        return ""
    text = path.read_text()
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    return text


def campaign(
    spec: Mapping[str, Any] | str | os.PathLike,
    client: Any = None,
    *,
    out: str | os.PathLike | None = None,
    chunk: int | None = None,
    threads: int | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """Runs an experiment as tasks, on a Dask cluster when ``client`` is a
    ``dask.distributed.Client`` (here otherwise), and returns the rows :func:`run` returns.

    - ``spec``: :func:`run`'s keyword arguments as a dict (``{"preset": "wlan", "loss":
      [0.01, 0.02], "seeds": 20}``, ``"scenario"`` among them if wanted), or a scenario
      file's path.
    - ``out``: a JSON lines file. Each task's records are appended as it finishes, so an
      interrupted campaign (Ctrl-C, a lost worker, a crash) keeps what finished; run the
      same campaign with the same ``out`` and only the missing runs run. Records of another
      campaign in it are refused. At the end the file holds every run in order.
    - ``chunk``: runs per task (default: about four tasks per worker, at most 50 runs).
    - ``threads``: threads per task; by default 1 on Dask (a worker per core) and every core
      here.

    The workers need this package installed (the same version), and the files a scenario
    names by relative path (traces) at the same place. The rows equal a local
    :func:`run`'s, all columns but ``wall_time_s``: every run is a function of its seed.
    """
    if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1):
        raise ValueError(f"chunk={chunk!r}: give a whole number of runs per task, 1 or more")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 0):
        raise ValueError(f"threads={threads!r}: give 0 (every core) or a number of threads")
    if isinstance(spec, (str, os.PathLike)):
        spec = {"scenario": spec}
    spec = dict(spec)
    for name in _RUN_ONLY:
        spec.pop(name, None)
    scenario = spec.pop("scenario", None)
    shard = spec.pop("shard", None)
    p = plan(scenario, shard=shard, **spec)
    text, kind, base, file = _scenario(scenario)
    opts = _options(spec)
    if file is not None:
        # The workers get the file's text: they need not see the file, only what it names
        # by relative path (traces), from the same directory.
        text, base = Path(file).read_text(), str(Path(file).resolve().parent)
    payload = json.dumps(
        {"options": json.dumps(opts), "text": text, "kind": kind, "base": base, "shard": shard}
    )
    journal = Path(out) if out is not None else None
    if journal is not None:
        if journal.suffix != ".jsonl":
            raise ValueError(f"out={str(journal)!r}: give a .jsonl file name")
        if journal.exists() and not journal.is_file():
            raise ValueError(f"out={str(journal)!r} is not a file")
        # Fails now, not after the campaign, when the place cannot be written.
        journal.parent.mkdir(parents=True, exist_ok=True)
        with open(journal, "a"):
            pass
    done_text = _read_journal(journal) if journal is not None else ""
    try:
        done = set(p.finished(done_text))
    except ValueError as e:
        raise ValueError(f"out={str(journal)!r}: {e}") from None
    if journal is not None and done_text != journal.read_text():
        journal.write_text(done_text)
    if threads is None:
        threads = 1 if client is not None else 0
    todo = [i for i in p.indices() if i not in done]
    parts: list[str] = [done_text]
    bar = _Progress(progress, len(p))
    if todo:
        workers = 1
        if client is not None:
            workers = max(1, len(client.scheduler_info().get("workers", {})))
        size = chunk or max(1, min(50, math.ceil(len(todo) / (4 * workers))))
        chunks = [todo[i : i + size] for i in range(0, len(todo), size)]

        def record(text: str) -> None:
            parts.append(text)
            if journal is not None:
                with open(journal, "a") as f:
                    f.write(text)
                    f.flush()
                    os.fsync(f.fileno())
            bar(len(done) + sum(t.count("\n") for t in parts[1:]))

        if client is None:
            for c in chunks:
                record(p.run(c, threads, None))
        else:
            from dask.distributed import as_completed

            futures = client.map(
                _run_chunk, [payload] * len(chunks), chunks, [threads] * len(chunks), pure=False
            )
            for future in as_completed(futures):
                record(future.result())
    csv, jsonl = p.finish("".join(parts))
    if journal is not None:
        tmp = journal.with_suffix(".jsonl.tmp")
        tmp.write_text(jsonl)
        tmp.replace(journal)
    return _frame(csv)


def presets() -> pd.DataFrame:
    """The link presets: the values a run uses (the middle of each range a paper gives),
    the ranges, the bulk size, the WLAN hop when there is one, and the source."""
    rows = [json.loads(line) for line in _native.presets()]
    return pd.DataFrame(rows).set_index("name")


def columns() -> dict[str, str]:
    """What each column of :func:`run`'s DataFrame means, with its unit (as ``qfec lab run
    --columns`` prints it)."""
    return dict(_native.columns())


def plot(
    df: pd.DataFrame,
    y: str = "completion_time_s",
    x: str = "loss",
    by: str = "variant",
    facet: str | None = "preset",
    ax: Any = None,
) -> "matplotlib.figure.Figure":
    """The median of ``y`` against ``x``, a line per value of ``by``, with the interquartile
    range shaded; one panel per value of ``facet`` (presets are never pooled into one curve
    unless ``facet=None``, and then only when the frame has a single preset). Needs
    matplotlib (``pip install 'qfec[plot]'``)."""
    import matplotlib.pyplot as plt

    for name in (y, x, by) + ((facet,) if facet else ()):
        if name not in df.columns:
            raise ValueError(f"{name!r} is not a column; see qfec.lab.columns()")
    if facet is None and "preset" in df.columns and df["preset"].nunique() > 1:
        raise ValueError(
            "the frame holds several presets: give facet='preset', or select one preset"
        )
    panels = sorted(df[facet].unique()) if facet else [None]
    if ax is None:
        fig, axes = plt.subplots(
            1,
            len(panels),
            figsize=(4.5 * len(panels) + 1.5, 3.6),
            squeeze=False,
            sharey=True,
            layout="constrained",
        )
        axes = list(axes[0])
    else:
        fig, axes = ax.figure, [ax]
        if len(panels) != 1:
            raise ValueError("one axes given, but the frame has several panels: give ax=None")
    for a, panel in zip(axes, panels):
        part = df if panel is None else df[df[facet] == panel]
        for key, g in part.groupby(by, sort=True):
            q = g.groupby(x)[y].quantile([0.25, 0.5, 0.75]).unstack()
            at = q.index * 100 if x == "loss" else q.index
            a.plot(at, q[0.5], marker="o", label=str(key))
            a.fill_between(at, q[0.25], q[0.75], alpha=0.2)
        xs = sorted(part[x].unique())
        if len(xs) <= 12:
            a.set_xticks([v * 100 for v in xs] if x == "loss" else xs)
        a.set_xlabel("loss (%)" if x == "loss" else x)
        a.set_title(f"{facet} = {panel}" if panel is not None else "")
        a.grid(alpha=0.3)
    axes[0].set_ylabel(f"median {y}")
    seeds = sorted(df["seed"].unique()) if "seed" in df.columns else []
    fig.suptitle(
        f"{len(df)} runs, {len(seeds)} seeds per point, qfec {_native.version()}",
        fontsize="small",
    )
    # Beside the panels, never over the data; each label once.
    handles = {lab: h for a in axes for h, lab in zip(*a.get_legend_handles_labels())}
    fig.legend(handles.values(), handles.keys(), title=by, loc="outside right upper",
               fontsize="small")
    return fig
