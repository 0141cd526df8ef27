"""Shared pytest configuration: hypothesis profiles and the ``gpu`` marker."""

import os

from hypothesis import HealthCheck, settings

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
