"""pytest configuration: fixtures and the hypothesis profiles.  Helpers (plain functions) are in
tests/helpers.py.

Hypothesis profiles (select with HYPOTHESIS_PROFILE=name; default 'default'):

* ``default`` (CI and ``bash run.sh test``): no shrink phase, so a failing property reports its
  first falsifying example at once instead of shrinking for minutes on the reference engine;
  a 2 s per-example deadline for tests that do not set their own, and at most 60 examples;
* ``dev``: the same with shrinking on, for a developer who wants a minimal example (pytest-timeout
  still bounds the whole test);
* ``thorough``: 500 examples, shrinking on, no deadline (a long local run).

Every test also has a wall-clock timeout (pytest-timeout, default in pyproject.toml).
"""
import os

import pytest
from hypothesis import HealthCheck, Phase, settings

_NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target)
settings.register_profile("default", deadline=2000, max_examples=60, phases=_NO_SHRINK,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=2000, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", deadline=None, max_examples=500, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(params=["fast", "ref"])
def impl(request):
    return request.param
