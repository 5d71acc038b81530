"""ptsweep: hyperparameter transfer for the Probabilistic Transformer (PT) with muP.

Entry points: ``python -m ptsweep --help`` (ptsweep/cli.py), :func:`ptsweep.train.run` for one training run, and
``ptsweep.sweeps`` for the studies. Importing the package has no side effects and imports no heavy dependencies.
"""

__version__ = "0.1.0"
