"""The `cuda` marker: tests that need a CUDA device (scripts/gpu_check.sh runs them with `-m cuda`)."""


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda: needs a CUDA device (skipped without one; run by scripts/gpu_check.sh)")

