"""experiments/coord-check/probe_topic_training.py at smoke size: one ``train.run`` per width with its probe
TopicTerms; the table it prints (a block per measured step, one line per term with a value per width and the slope)
and its ``--brief`` line."""

from __future__ import annotations


import pytest

from experiment_scripts import load_script

probe_topic_training = load_script("experiments/coord-check/probe_topic_training.py")

ARGS = ["--preset", "smoke", "--widths", "32,64", "--steps", "3", "--measure", "1,3", "sweep.coord_check.steps=3",
        "sweep.coord_check.batch_size=4", "model.scaling=rank"]


def test_the_table_has_a_block_per_measured_step_and_a_line_per_term(capsys):
    probe_topic_training.main(ARGS)
    lines = capsys.readouterr().out.splitlines()
    heads = [i for i, ln in enumerate(lines) if ln.startswith("--- step")]
    assert [lines[i] for i in heads] == [f"--- step {s} (iteration 1); columns: widths [32, 64], log-log slope"
                                         for s in (1, 3)]
    block = {ln[2:13].strip(): ln[13:].split()[:-2] for ln in lines[heads[0] + 1:heads[1]]}  # name: per width
    assert {"gnorm", "rms_dB_xN", "dE", "dE|dB P0", "dm", "coh upd P0", "|dP|"} <= set(block)
    assert len(lines) - heads[1] - 1 == heads[1] - 1  # the same terms at both steps
    # Adam's first step moves each coordinate of B by its LR, which muP sets to 1/N: N x RMS(dB) is width-free
    assert all(len(v) == 2 for v in block.values())
    one, two = (float(v) for v in block["rms_dB_xN"])
    assert one == pytest.approx(two, rel=1e-3) and one > 0


def test_brief_prints_the_slopes_of_de_and_dm_per_measured_step(capsys):
    probe_topic_training.main(ARGS + ["--brief"])
    line = capsys.readouterr().out.strip()
    assert line.startswith("sweep.coord_check.steps=3") and "eps_b 0.0 |" in line
    assert line.split("| ")[1].startswith("step 1: dE ") and "; step 3: dE " in line
