"""The inline frame builder (tests/framebuilder.py) makes the frames the Kineto reader makes of
the same events, so analyzer tests on inline frames test what users' traces give."""

from __future__ import annotations

import pytest
from polars.testing import assert_frame_equal

from rightsize.traces.kineto import read_kineto
from tests.framebuilder import FrameBuilder
from tests.tracebuilder import BASE_NS, two_step_trace

FRAMES = ("kernels", "transfers", "runtime", "cpu_ops", "steps", "memory", "devices")


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    read = read_kineto(two_step_trace().write(tmp_path_factory.mktemp("t") / "two.json"))
    inline = two_step_trace(FrameBuilder(base_ns=BASE_NS, rank=0, world_size=2,
                                         backend="nccl")).trace()
    return read, inline


@pytest.mark.parametrize("frame", FRAMES)
def test_inline_frames_equal_the_readers(pair, frame):
    read, inline = pair
    assert_frame_equal(inline.frame(frame), read.frame(frame))


def test_launch_flows_and_meta(pair):
    read, inline = pair
    cols = ["id", "cat", "phase", "ts_ns"]
    assert_frame_equal(inline.flows.select(cols).sort(cols), read.flows.select(cols).sort(cols))
    assert (inline.meta.rank, inline.meta.world_size, inline.meta.backend) == \
        (read.meta.rank, read.meta.world_size, read.meta.backend) == (0, 2, "nccl")
