#!/usr/bin/env python3
"""
A training loop with NumPy only
===============================

The loop of ``examples/python/training_step.py`` without PyTorch, on any
machine: the dataset's per-atom features stay in one (atoms, features)
array that mtsarray reads zero-copy; the structures are split once into
fixed batches, and each batch gets its movements, its batch array and its
movement plan (:class:`mtsarray.MovePlan`) once. A step runs one plan (one
copy, no checks, no allocation) and fits a linear model of the structures'
energies with plain gradient descent in NumPy. Every gathered batch is
checked against NumPy's own indexing; the script exits with a message when
one is wrong, or when the loss does not go down.

Usage: ``python3 examples/python/training_loop_numpy.py``
"""

# %%
# The dataset
# -----------
#
# 64 structures of 4 to 11 atoms, 8 features per atom; the energy of a
# structure is the sum over its atoms of a fixed linear function of their
# features, which the loop must learn.

import sys

import numpy as np

import mtsarray

N_STRUCTURES = 64
N_FEATURES = 8
BATCH_STRUCTURES = 16
LEARNING_RATE = 0.005
EPOCHS = 40

rng = np.random.default_rng(0)
counts = rng.integers(4, 12, size=N_STRUCTURES)  # atoms per structure
offsets = np.cumsum(counts) - counts  # each structure's first row
features_host = rng.standard_normal((int(counts.sum()), N_FEATURES))
true_weights = rng.standard_normal(N_FEATURES)
energies = np.add.reduceat(features_host @ true_weights, offsets)

features = mtsarray.from_dlpack(features_host)  # zero-copy
print(f"{N_STRUCTURES} structures, {len(features_host)} atoms, features {features.shape}")

# %%
# The movements of a batch
# ------------------------
#
# One movement per atom, ``(sample_in, sample_out, properties_start_in,
# properties_start_out, properties_length)``: the atoms of ``structures``,
# in that order, into consecutive rows of the batch, every feature. Built
# without a Python loop over atoms; ``slot`` is each row's structure.


def batch_movements(structures):
    sizes = counts[structures]
    slot = np.repeat(np.arange(len(structures)), sizes)
    first_row = np.cumsum(sizes) - sizes
    rows = np.arange(int(sizes.sum()))
    movements = np.zeros((len(rows), 5), dtype=np.int64)
    movements[:, 0] = offsets[structures][slot] + (rows - first_row[slot])
    movements[:, 1] = rows
    movements[:, 4] = N_FEATURES
    return movements, slot


# %%
# The batches, made once
# ----------------------
#
# Each plan checks its movements here, once; running it later is one copy.

batches = []
order = rng.permutation(N_STRUCTURES)
for structures in np.split(order, N_STRUCTURES // BATCH_STRUCTURES):
    movements, slot = batch_movements(structures)
    batch = mtsarray.zeros((len(movements), N_FEATURES), dtype="float64")
    plan = mtsarray.MovePlan(batch, features, movements)
    batches.append((batch, plan, movements, slot, structures))
print(f"{len(batches)} batches of {BATCH_STRUCTURES} structures")

# %%
# A step
# ------
#
# The plan gathers the batch; NumPy reads it zero-copy, predicts each
# structure's energy (the sum of its atoms' ``x @ weights``) and takes one
# gradient step of the mean squared error.

weights = np.zeros(N_FEATURES)


def training_step(batch, plan, slot, structures):
    plan(batch, features)  # the gather: one copy
    x = np.from_dlpack(batch)  # zero-copy on the CPU
    per_structure = np.zeros((len(structures), N_FEATURES))
    np.add.at(per_structure, slot, x)  # each structure's summed features
    error = per_structure @ weights - energies[structures]
    weights[:] -= LEARNING_RATE * 2 * per_structure.T @ error / len(error)
    return float(np.mean(error**2))


# %%
# The loop
# --------
#
# Every batch is checked once against NumPy's own indexing; then 40 epochs.

for batch, plan, movements, slot, structures in batches:
    plan(batch, features)
    if not np.array_equal(np.from_dlpack(batch), features_host[movements[:, 0]]):
        sys.exit("training_loop_numpy: a gathered batch is wrong")

losses = []
for epoch in range(EPOCHS):
    for index in rng.permutation(len(batches)):
        batch, plan, _, slot, structures = batches[index]
        losses.append(training_step(batch, plan, slot, structures))
    if epoch % 10 == 0 or epoch == EPOCHS - 1:
        print(f"epoch {epoch:2d}: loss {losses[-1]:.3g}")

if not losses[-1] < losses[0] / 100:
    sys.exit(f"training_loop_numpy: the loss went from {losses[0]} to {losses[-1]} only")
print(f"training_loop_numpy: {len(losses)} steps, loss {losses[0]:.3g} -> {losses[-1]:.3g}")

# %%
# The loss curve
# --------------
#
# Drawn when matplotlib is installed (the documentation's build has it).

try:
    import matplotlib.pyplot as plt
except ImportError:
    print("training_loop_numpy: matplotlib is not installed: no plot")
else:
    figure, axes = plt.subplots(figsize=(6, 3.5))
    axes.semilogy(losses)
    axes.set_xlabel("step")
    axes.set_ylabel("mean squared error")
    axes.set_title("A linear model trained on batches gathered by mtsarray")
    figure.tight_layout()
