"""Shared pytest configuration: hypothesis profiles, and the ``needs_ptxas`` marker's check."""

import os

from hypothesis import HealthCheck, settings

from kernel_checks import require_ptxas


def pytest_runtest_setup(item):
    """A ``needs_ptxas`` test skips without ptxas, or fails under ``GLUONKIT_REQUIRE_PTXAS=1``."""
    if item.get_closest_marker("needs_ptxas") is not None:
        require_ptxas()

# `ci`: deterministic and bounded, so the suite's time and results do not vary per run.
settings.register_profile(
    "ci",
    max_examples=60,
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
# `dev`: the same bound, random seeds, to find new counterexamples locally.
settings.register_profile("dev", max_examples=60, deadline=None)
# `thorough`: for a long local run before changing the layout algebra.
settings.register_profile("thorough", max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
