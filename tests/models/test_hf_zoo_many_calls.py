"""The Hugging Face model zoo (tests/models/hf_zoo.py), each model called 100 times.

test_hf_zoo.py calls each compiled model twice, which never reaches CPython's quickening (a code object is
specialised after about eight runs), where a graph of 255+ inputs once crashed the interpreter (at its ~7th call).
Here every architecture that test_hf_zoo.py runs in inference (the same lists, builds and output comparison) is
compiled with backend eager and called 100 times: fresh inputs on most calls, the previous call's input objects
on some (as they are, or with new values written into them in place), and its outputs compared with eager's on
every call. The models with graph breaks run their continuations 100 times too. Slow: minutes on 2 cores.
"""

import pytest
import torch

import framejit
from framejit.testing import CompileCounter
from tests.models.hf_zoo import ONE_GRAPH, WITH_BREAKS, build
from tests.models.test_hf_zoo import assert_outputs_equal, quiet_transformers  # noqa: F401 (an autouse fixture)
from tests.reliability.many_calls import CALLS, inputs_for, one_thread  # noqa: F401

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]

# zoo models whose graph takes more values than one CALL's oparg holds (255), the case that once crashed under
# quickening: MobileNetV2's 156 parameters and its BatchNorms' running statistics: 261 inputs (the old code
# generation crashed on its 100 calls)
MORE_INPUTS_THAN_A_BYTE = {"mobilenet_v2"}


def call_many_times(model, make_inputs, nopython):
    cnt = CompileCounter()
    compiled = framejit.optimize(cnt, nopython=nopython)(model)
    inputs = None
    with torch.no_grad():
        for call in range(CALLS):
            inputs = inputs_for(call, inputs, make_inputs)
            want = model(**inputs)
            try:
                assert_outputs_equal(compiled(**inputs), want)
            except AssertionError as e:
                raise AssertionError(f"call {call}: {e}") from e
            if call == 0:
                after_first = cnt.frame_count
    assert cnt.frame_count == after_first >= 1  # 99 calls from the cache: no recompile
    return cnt


@pytest.mark.parametrize("model_type", sorted(ONE_GRAPH))
def test_one_graph_model_called_100_times_matches_eager(model_type):
    overrides, make_inputs = ONE_GRAPH[model_type]
    cnt = call_many_times(build(model_type, overrides, train=False), make_inputs, nopython=True)
    assert cnt.frame_count == 1
    if model_type in MORE_INPUTS_THAN_A_BYTE:
        assert sum(node.op == "placeholder" for node in cnt.graphs[0].graph.nodes) > 255


@pytest.mark.parametrize("model_type", sorted(WITH_BREAKS))
def test_model_with_graph_breaks_called_100_times_matches_eager(model_type):
    overrides, make_inputs, _ = WITH_BREAKS[model_type]
    cnt = call_many_times(build(model_type, overrides, train=False), make_inputs, nopython=False)
    assert cnt.frame_count >= 2
