"""The commands, one module per sweep, all on Ray Tune (Optuna proposes trials where a search is needed):
tune_small, verify_transfer ([S] §3.1), scaling_curves ([S] §3.2), lr_transfer, lr_horizon, coord_check and demo,
each with ``run(cfg: RunConfig) -> Path``, and the plans they share (baseline tuning and rule, PT's grid,
transfer.yaml, the horizon rule). They run trials through ``ptsweep.trials`` and write reports with
``ptsweep.reports``.
"""
