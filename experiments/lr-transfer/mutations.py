"""Mutation check of tests/test_lr_transfer.py: apply each mutation to the analysis / study code, run the fast tests,
report which test caught it, restore the file. Run from anywhere: python experiments/lr-transfer/mutations.py"""
import pathlib
import subprocess
root = pathlib.Path(__file__).resolve().parents[2]
M = [
 ("argmax instead of argmin", "ptsweep/analysis/transfer_drift.py", 'best = cand.iloc[int(cand["mean"].to_numpy().argmin())]', 'best = cand.iloc[int(cand["mean"].to_numpy().argmax())]'),
 ("seed mean uses the first seed only", "ptsweep/analysis/transfer_drift.py", 'mean = float(v.mean()) if np.all(np.isfinite(v)) else math.inf', 'mean = float(v[0]) if np.all(np.isfinite(v)) else math.inf'),
 ("diverged seeds dropped instead of disqualifying", "ptsweep/analysis/transfer_drift.py", 'mean = float(v.mean()) if np.all(np.isfinite(v)) else math.inf', 'mean = float(v[np.isfinite(v)].mean()) if np.isfinite(v).any() else math.inf'),
 ("single-seed values are candidates", "ptsweep/analysis/transfer_drift.py", 'cand = c[(c["n"] == n_max) & np.isfinite(c["mean"])]', 'cand = c[np.isfinite(c["mean"])]'),
 ("unpaired SE in the plausible set", "ptsweep/analysis/transfer_drift.py", 'se = diff.std(axis=0, ddof=1) / math.sqrt(len(diff))', 'se = np.hypot(m.std(axis=0, ddof=1), m[:, np.isclose(xs, x_opt)][:, 0].std(ddof=1)) / math.sqrt(len(diff))'),
 ("drift sign reversed", "ptsweep/analysis/transfer_drift.py", 'res["drift_log2"] = float(math.log2(hi["x_opt"] / lo["x_opt"]))', 'res["drift_log2"] = float(math.log2(lo["x_opt"] / hi["x_opt"]))'),
 ("gain SE without seed spread", "ptsweep/metric_keys.py", 'var = sum((v - mean) ** 2 for v in vals) / (n - 1) if n > 1 else 0.0', 'var = 0.0'),
 ("stage 2 refines the worst values", "ptsweep/sweeps/lr_transfer_plan.py", 'best = g[np.isfinite(g["loss"])].sort_values(["loss", "x"]).head(', 'best = g[np.isfinite(g["loss"])].sort_values(["loss", "x"], ascending=False).head('),
 ("stage 2 reuses seed 0", "ptsweep/sweeps/lr_transfer_plan.py", 'pairs += [_trial(cfg, study, par, width, x, cfg.seed + s, anchor)', 'pairs += [_trial(cfg, study, par, width, x, cfg.seed + s - 1, anchor)'),
 ("edge flag ignores the lower edge", "ptsweep/analysis/transfer_drift.py", 'at_edge=bool(i_curve == 0 or i_curve == len(c) - 1)', 'at_edge=bool(i_curve == len(c) - 1)'),
 ("bootstrap not paired (independent per value)", "ptsweep/analysis/transfer_drift.py", 'boot_means = m[idx].mean(axis=1)  # (n_boot, n_candidates)', 'boot_means = np.stack([m[rng.integers(0, m.shape[0], size=(n_boot, m.shape[0])), j].mean(axis=1) for j in range(m.shape[1])], axis=1)'),
]
def main() -> None:
    """Apply each mutation in turn, run the fast tests, print which test caught it, restore the file."""
    for name, f, old, new in M:
        p = root / f
        s = p.read_text()
        assert old in s, f"{name}: the mutated line is no longer in {f}"
        p.write_text(s.replace(old, new, 1))
        try:
            r = subprocess.run([str(root / ".venv/bin/python"), "-m", "pytest", "-q", "-x", "-m", "not slow",
                                "tests/test_lr_transfer.py", "-p", "no:cacheprovider"], cwd=root, capture_output=True,
                               text=True)
            failed = [line for line in r.stdout.splitlines() if line.startswith("FAILED")]
            print(f"{name}: {'CAUGHT by ' + failed[0].split('::')[1].split(' ')[0] if failed else 'NOT caught'}",
                  flush=True)
        finally:
            p.write_text(s)


if __name__ == "__main__":
    main()
