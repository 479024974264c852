"""Replicas: what one device's gradient would be, seen from one replica of a tf.distribute
strategy."""

from __future__ import annotations

from typing import Any

import tensorflow as tf


def one_device_sum_of_squares(local: Any) -> Any:
    """Summed over the replicas of the strategy running now (inside `strategy.run`). Under
    tf.distribute each replica's loss is divided by the number of replicas
    (`tf.nn.compute_average_loss`, Keras's losses) and the replicas' gradients are summed, so
    each replica's upstream is its rows of one device's: their sums of squares add up.

    >>> float(one_device_sum_of_squares(tf.constant(4.0)))  # no strategy: itself
    4.0
    """
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return local
    return context.all_reduce(tf.distribute.ReduceOp.SUM, local)
