import math

import pytest
import torch

from zoo.common.schedules import warmup_cosine


@pytest.mark.parametrize("floor", [0.1, 0.0])
def test_warmup_cosine_hand_values(floor):
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=2.0)
    factor = warmup_cosine(optimizer, warmup=4, total=14, floor=floor).lr_lambdas[0]
    assert [factor(s) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]  # linear warm-up, (step + 1) / warmup
    assert factor(4) == pytest.approx(1.0)  # the cosine starts at the base rate
    assert factor(9) == pytest.approx(floor + (1 - floor) * 0.5)  # half way: cos(pi / 2) = 0
    assert factor(14) == pytest.approx(floor) and factor(100) == pytest.approx(floor)  # held after total
    assert factor(6) == pytest.approx(floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * 0.2)))
    assert optimizer.param_groups[0]["lr"] == pytest.approx(2.0 * 0.25)  # LambdaLR applied step 0 already
