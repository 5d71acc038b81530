"""The sweeps, one module per command, all on Ray Tune (Optuna proposes trials where a search is needed).

tune_small (Optuna TPE + ASHA over the 7 transferable HPs), verify_transfer (random-search check of the transferred
point, [S] §3.1), scaling_curves (PT vs BERT vs UT at matched sizes, [S] §3.2), demo (the three chained at toy scale),
coord_check and lr_transfer (muP diagnostics). Each module exposes ``run(cfg: RunConfig) -> Path``.

Shared machinery, one job per module (each imports only modules listed before it; none imports a sweep):

    fields        names every module shares (METRIC, TABLE_METRICS, ...); imports no other sweeps module
    ray_session   Ray with token auth, Ctrl-C and SIGTERM stops          code_version  the source fingerprint
    ledger        trial folders and records (resume), interrupt marker, trial_starts.log
    trainable     the Ray function trainable (one train.run per trial)   runner        fixed lists of trials on Tune
    optuna_store  the persistent Optuna study                           search        Optuna-proposed trials on Tune
    transfer      transfer.yaml: path, reading, provenance check        outputs       tables, W&B summary, study names
"""
