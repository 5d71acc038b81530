"""The sweeps, one module per command, all on Ray Tune (Optuna proposes trials where a search is needed).

tune_small (Optuna TPE + ASHA over the 7 transferable HPs), verify_transfer (random-search check of the transferred
point, [S] §3.1), scaling_curves (PT vs BERT vs UT at matched sizes, [S] §3.2), demo (the three chained at toy scale),
coord_check and lr_transfer (muP diagnostics). Shared machinery (Ray session, trainable, ledger/resume, tables,
W&B summary runs) lives in :mod:`ptsweep.sweeps.common`. Each module exposes ``run(cfg: RunConfig) -> Path``.
"""
