"""qfec from Python: the laboratory's experiments as pandas DataFrames.

``qfec.lab.run(preset="wlan", loss=[0.01, 0.02], fec=["none", "adaptive"], seeds=5)`` runs
what ``qfec lab run --preset wlan --loss 0.01,0.02 --fec none,adaptive --seeds 5`` runs, in
this process (the simulator in Rust, with the GIL released), and returns one row per run.
``qfec.lab.campaign(spec, client=...)`` runs the same on a Dask cluster and resumes an
interrupted campaign. See ``help(qfec.lab)``.
"""

from . import lab
from ._native import version as _version

__version__: str = _version()

__all__ = ["lab", "__version__"]
