"""The sweeps, one module per command, all on Ray Tune (Optuna proposes trials where a search is needed):
tune_small, verify_transfer ([S] §3.1), scaling_curves ([S] §3.2), demo, coord_check and lr_transfer, each with
``run(cfg: RunConfig) -> Path``. The shared machinery (docs/files.md) imports no sweep.
"""
