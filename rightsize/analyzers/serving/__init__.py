"""Serving: how long a served model's prefill and decode steps take on a deployment.

``ops`` (the operators of a forward pass per GPU), ``timer``/``tables`` (their times: measured
tables, else the per-kernel projection), ``forward`` (a step's time by operator class),
``factors`` (calibration's interpretable factors and ranges), ``step`` (the contract the
serving simulation and plans use). Pure analyzers; reading tables is done once per process.
"""
