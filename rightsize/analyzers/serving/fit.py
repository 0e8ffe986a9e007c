"""A small damped Gauss-Newton (Levenberg-Marquardt) least-squares solver, numpy only.

Used to fit the per-GPU rate curves on measured tables (``benchmarks/fit_serving_rates.py``)
and the calibration factors on a user's measured points (``calibrate.py``): a handful of
parameters, residuals from a vectorized function, a numerical Jacobian. Pure.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Residuals = Callable[[np.ndarray], np.ndarray]


def least_squares(residuals: Residuals, x0: np.ndarray, *, lower: np.ndarray | None = None,
                  upper: np.ndarray | None = None, iterations: int = 100,
                  tol: float = 1e-10) -> np.ndarray:
    """``x`` minimising ``sum(residuals(x) ** 2)`` from ``x0``, kept within [lower, upper]."""
    x = np.asarray(x0, dtype=float).copy()
    lo = np.full_like(x, -np.inf) if lower is None else np.asarray(lower, float)
    hi = np.full_like(x, np.inf) if upper is None else np.asarray(upper, float)
    x = np.clip(x, lo, hi)
    r = residuals(x)
    cost = float(r @ r)
    damping = 1e-3
    for _ in range(iterations):
        jac = np.empty((len(r), len(x)))
        for j in range(len(x)):
            step = 1e-6 * max(1.0, abs(x[j]))
            xj = x.copy()
            xj[j] += step
            jac[:, j] = (residuals(xj) - r) / step
        jtj, jtr = jac.T @ jac, jac.T @ r
        improved = False
        for _ in range(20):
            a = jtj + damping * np.diag(np.diag(jtj) + 1e-12)
            try:
                delta = np.linalg.solve(a, -jtr)
            except np.linalg.LinAlgError:
                damping *= 10
                continue
            trial = np.clip(x + delta, lo, hi)
            rt = residuals(trial)
            ct = float(rt @ rt)
            if np.isfinite(ct) and ct < cost:
                improved = cost - ct > tol * max(cost, 1e-30)
                x, r, cost = trial, rt, ct
                damping = max(damping / 3, 1e-9)
                break
            damping *= 10
        if not improved:
            break
    return x
