"""The commands, one module per sweep with ``run(cfg: RunConfig) -> Path`` (tune_small, verify_transfer, scaling_curves,
lr_transfer, lr_horizon, coord_check, demo), and the plans they share. They run trials through ``ptsweep.trials`` and
write reports with ``ptsweep.reports``.
"""
