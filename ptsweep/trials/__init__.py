"""The machinery every sweep shares: local Ray with token auth, trials on Ray Tune (a fixed list or an Optuna
search), the trial ledger, the trainable, GPU placement and the source fingerprint. Imports no command
(``ptsweep.sweeps``) and no report writer (``ptsweep.reports``).
"""
