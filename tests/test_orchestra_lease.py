"""An orchestration owner's lease: a lapse, even one renewed since, is remembered (the
guard killed the owner's executions, so the owner stops); each renewal feeds the fence;
an owner covered by another fence of its process holds none and never lapses."""

from __future__ import annotations

import threading
import time

from lirun.exec.fence import Fence
from lirun.orchestra.lease import OwnerLease


def test_a_lapse_is_remembered_after_a_renewal() -> None:
    fence = Fence(4.0)  # not started: no guard, only the owner's side
    lease = OwnerLease(fence)
    assert not lease.lapsed()
    lease.renewed(time.monotonic())
    assert not lease.lapsed()
    fence.deadline = time.monotonic() - 0.01
    assert lease.lapsed()
    lease.renewed(time.monotonic())
    assert fence.remaining() > 2.0
    assert lease.lapsed(), "the guard killed the owner's work: it stops all the same"
    lease.close()


def test_an_owner_without_a_fence_of_its_own_never_lapses() -> None:
    lease = OwnerLease(None)
    lease.renewed(time.monotonic())
    assert not lease.lapsed()
    lease.close()


def test_the_heartbeat_renews_the_lease_on_each_beat() -> None:
    fence = Fence(4.0)
    lease = OwnerLease(fence)
    beaten = threading.Event()
    before = fence.deadline
    with lease.heartbeat(beaten.set, 0.05) as heartbeat:
        assert beaten.wait(10)
        deadline = time.monotonic() + 10
        while heartbeat.beats < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert heartbeat.beats >= 1
    assert fence.deadline > before
