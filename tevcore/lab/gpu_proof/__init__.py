"""The GPU proof: every figure a GPU can give without trained weights, in one call of `scripts/gpu_check.sh`.

Random-weight targets at the real geometries of SmolLM2-135M, Qwen3-8B and
Llama-3.1-8B (and a DFlash drafter at the published Qwen3-8B drafter's) are
built on the device, so nothing is downloaded or carried but the checkout.
Random weights give every cost and no speedup: a random drafter's drafts are
rejected. The one speedup figure (step `prediction`) combines the measured
cost curve with acceptance measured on CPU for the embedded SmolLM2 pair, and
says it is predicted. `--rehearse` runs the same steps on the CPU at tiny
geometry, so the script is proven before a GPU is lent.

Modules: `schema` (the keys of every step's result record, one definition
for both paths), `plans` (geometries and sizes per mode), `models` (building
them), `steps`, `rounds_steps` and `predict` (the measurements), `cli` (the
measuring steps in one process). The harness that runs the checkout's
CUDA-marked tests is a script, `scripts/gpu_cuda_tests.py`, not part of the
package.
"""
