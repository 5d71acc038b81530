# Sourced by run_basin_levers.sh and run_weight_levers.sh after study_env.sh: the 1,200-step design both measure on
# (Z damping 0.5, 25 % warm-up, mup_sp anchored at width 32 with rank 8, widths 32 and 128, the LR grid
# 0.01 / 0.02 / 0.04 = eta*/2, eta*, 2 eta*; DATA: another corpus), and EXTRA_ARGS: the caller's EXTRA split into
# words (overrides that change no trial key, e.g. gpu_levers.sh's device and Ray settings).
LEVER_DESIGN=(preset=lr_study tracker=disabled train.tokens=1228800 optim.warmup_frac=0.25 model.damping_z=0.5
              'sweep.lr_transfer.parametrizations=[mup_sp]' model.base_width=32 model.base_rank=8
              'sweep.lr_transfer.widths=[32,128]' sweep.lr_transfer.grid_points=3
              'sweep.lr_transfer.sp_grid_range=[0.01,0.04]' ${DATA:+"data=$DATA"})
read -r -a EXTRA_ARGS <<< "${EXTRA:-}"
