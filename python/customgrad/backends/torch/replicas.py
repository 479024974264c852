"""Replicas: what one device's gradient would be, seen from one rank of a data-parallel engine."""

from __future__ import annotations

from typing import Any

import torch


def one_device_sum_of_squares(local: Any) -> Any:
    """All-reduced over the default process group, where one is running. DDP and FSDP average
    the ranks' gradients, so each rank's upstream is `world` times its rows of one device's: the
    one-device sum of squares is the ranks' sum divided by world².

    >>> float(one_device_sum_of_squares(torch.tensor(4.0)))  # no process group: itself
    4.0
    """
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return local
    total = local.detach().clone()
    dist.all_reduce(total)  # a sum, in place
    return total / dist.get_world_size() ** 2
