"""Two Ray nodes on one machine: workers placed across both, one node lost mid-stream and rejoined.

Ray's own multi-node test harness (``ray.cluster_utils.Cluster``) starts a head
and a second node as separate raylets on 127.0.0.1, each with a custom resource
naming it; replication's workers 0-3 (a copy of every input) need ``node_a``,
4-7 (the other copy) ``node_b``. Losing ``node_b`` kills its four actors: they
become erasures, every input is answered exactly from its copy on ``node_a``, and every request is answered or
explicitly failed; when a ``node_b`` joins again, the replacements start there.
"""

import time

import numpy as np
import pytest

ray = pytest.importorskip("ray")

import gencc  # noqa: E402
from gencc.errors import BatchFailedError  # noqa: E402
from gencc.runtime import CodedExecutor  # noqa: E402

from gencc.workloads import WorkloadFactory  # noqa: E402

from test_runtime import f  # noqa: E402

MODEL = WorkloadFactory("xsinx")  # importable on every node (the tests' folder is not on the nodes' path)

pytestmark = pytest.mark.ray


@pytest.fixture
def two_nodes(monkeypatch):
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # keep every node on 127.0.0.1 (ray_loopback)
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    import ray._private.ray_constants as ray_constants
    from ray.cluster_utils import Cluster

    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args=dict(num_cpus=1, resources={"node_a": 8},
                                                                node_ip_address="127.0.0.1", include_dashboard=False))
    nodes = {"b": cluster.add_node(num_cpus=1, resources={"node_b": 8}, node_ip_address="127.0.0.1")}
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    try:
        yield cluster, nodes
    finally:
        ray.shutdown()
        cluster.shutdown()


def _drain(futs, timeout=60):
    """Every future's outcome: a BatchResult or a BatchFailedError; anything else (or a hang) fails the test."""
    out = []
    for fu in futs:
        try:
            out.append(fu.result(timeout=timeout))
        except BatchFailedError as exc:
            out.append(exc)
    return out


def test_losing_a_node_mid_stream_loses_no_request_and_the_node_can_rejoin(two_nodes):
    cluster, nodes = two_nodes
    scheme = gencc.Replication(4, 8)  # a copy of every input on each node
    on_a = [w for w in range(8) if w < 4]
    on_b = [w for w in range(8) if w >= 4]
    assert sorted(scheme.assignment[w] for w in on_a) == sorted(scheme.assignment[w] for w in on_b) == [0, 1, 2, 3]
    resources = [{"node_a": 1} if w in on_a else {"node_b": 1} for w in range(8)]
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(4, 3))
    with CodedExecutor(MODEL, scheme, "ray", deadline=0.3, timeout=20, restart_timeout=5.0,
                       backend_options={"resources": resources}) as ex:
        be = ex.backend
        assert len({be.nodes[w] for w in on_a}) == 1 and len({be.nodes[w] for w in on_b}) == 1
        assert be.nodes[0] != be.nodes[4]
        before = _drain([ex.submit(X) for _ in range(5)])
        assert all(set(r.returned) & set(on_b) for r in before)  # both nodes answer
        cluster.remove_node(nodes.pop("b"))
        lost_at = time.monotonic()
        futs, first_answer = [], None
        while time.monotonic() - lost_at < 4.0:  # a stream across the loss (bounded: 4 s)
            futs.append(ex.submit(X))
            time.sleep(0.05)
            if first_answer is None and any(fu.done() and fu.exception() is None and set(fu.result().returned) <=
                                            set(on_a) for fu in futs):
                first_answer = time.monotonic() - lost_at
        during = _drain(futs)
        answered = [r for r in during if not isinstance(r, BatchFailedError)]
        assert len(during) == len(futs) and answered  # nothing lost: answered or explicitly failed
        assert first_answer is not None and first_answer < 2.0  # answering resumes within 2 s of the loss
        for r in answered:  # the copies on node_a: exact
            np.testing.assert_array_equal(r.outputs, f(X))
        assert ex.stats["crashes"] >= 4  # the lost node's actors died
        nodes["b"] = cluster.add_node(num_cpus=1, resources={"node_b": 8}, node_ip_address="127.0.0.1")
        for _ in range(600):  # the replacements start on the new node (bounded: 60 s)
            res = ex.submit(X).result(timeout=30)
            if set(on_b) & set(res.returned):
                break
            time.sleep(0.1)
        else:
            pytest.fail("no worker of the rejoined node answered within 60 s")
    assert be.nodes[4] not in (None, be.nodes[0])  # the replacements run on the rejoined node
