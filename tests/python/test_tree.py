"""customgrad._tree: which values are containers, the order of their leaves, rebuilding them, and
the paths that error messages name."""

import collections

import pytest

from customgrad import _tree

Pair = collections.namedtuple("Pair", "first second")


class MyList(list):
    pass


class MyTuple(tuple):
    pass


class MyDict(dict):
    pass


TREES = [
    1.0,
    None,
    (1.0, None, "a"),
    [1.0, 2.0],
    ({"b": [1, 2], "a": (3, None)}, 4),
    Pair(1, [2, {"y": 3, "x": None}]),
    {"k": MyList([1, MyTuple((2, 3))]), "d": MyDict(z=4, y=5)},
    collections.OrderedDict(b=1, a=2),
    ((), [], {}),
]


@pytest.mark.parametrize("tree", TREES, ids=repr)
def test_unflatten_rebuilds_what_flatten_took_apart(tree):
    leaves = _tree.flatten(tree)
    rebuilt = _tree.unflatten(tree, leaves)
    assert rebuilt == tree
    assert type(rebuilt) is type(tree)
    if isinstance(tree, dict):
        assert list(rebuilt) == list(tree)  # the keys in the original's order
    assert len(_tree.leaf_paths(tree)) == len(leaves)
    assert _tree.match(tree, tree) == leaves


def test_dict_leaves_in_sorted_key_order_and_none_a_leaf():
    tree = {"b": [1, 2], "a": (3, None)}
    assert _tree.flatten(tree) == [3, None, 1, 2]
    assert _tree.leaf_paths(tree, "args[0]") == [
        "args[0]['a'][0]", "args[0]['a'][1]", "args[0]['b'][0]", "args[0]['b'][1]"]


def test_ordereddict_keeps_its_order_and_a_deque_is_a_container_as_in_keras_tree():
    tree = collections.OrderedDict(b=[1, 2], a=collections.deque([3]))
    assert _tree.flatten(tree) == [1, 2, 3]
    assert _tree.leaf_paths(tree) == ["['b'][0]", "['b'][1]", "['a'][0]"]
    assert _tree.match({"a": [30], "b": None}, tree) == [None, None, 30]


def test_subclasses_of_list_tuple_and_dict_are_containers_rebuilt_with_their_class():
    tree = (MyList([1, 2]), MyDict(b=3, a=4), MyTuple((5,)))
    assert not any(_tree.is_leaf(x) for x in tree)
    assert _tree.flatten(tree) == [1, 2, 4, 3, 5]
    rebuilt = _tree.unflatten(tree, [10, 20, 40, 30, 50])
    assert [type(x) for x in rebuilt] == [MyList, MyDict, MyTuple]
    assert rebuilt == ([10, 20], {"b": 30, "a": 40}, (50,))
    assert _tree.leaf_paths(tree, "x") == [
        "x[0][0]", "x[0][1]", "x[1]['a']", "x[1]['b']", "x[2][0]"]


def test_flat_fast_paths_agree_with_the_nested_ones():
    flat = (1.0, None, "s")
    assert _tree.flatten(flat) == _tree.flatten((flat,)) == [1.0, None, "s"]
    assert _tree.unflatten(flat, [4, 5, 6]) == (4, 5, 6)
    assert _tree.unflatten([0, 0], (4, 5)) == [4, 5]
    assert _tree.match([7, 8, 9], flat) == [7, 8, 9]


def test_unflatten_refuses_the_wrong_number_of_leaves():
    with pytest.raises(ValueError):
        _tree.unflatten((1, [2, 3]), [1, 2])
    with pytest.raises(ValueError):
        _tree.unflatten((1, 2), [1, 2, 3])


def test_match_takes_a_list_for_a_tuple_and_none_for_a_subtree():
    structure = (0, {"a": 0, "b": Pair(0, 0)})
    assert _tree.match([1, {"a": 2, "b": None}], structure) == [1, 2, None, None]
    assert _tree.match(None, structure) == [None] * 4
    assert _tree.match([1, None], structure) == [1, None, None, None]
    assert _tree.match((1, {"a": 2, "b": [3, 4]}), structure) == [1, 2, 3, 4]


@pytest.mark.parametrize("value, message", [
    ((1, {"a": 2}),
     "at [1]: expected a dict with keys ['a', 'b'], received a dict with keys ['a']"),
    ((1, {"a": [2], "b": None}),
     "at [1]['a']: expected a single tensor, received a list of length 1"),
    ((1, {"a": 2, "b": (3,)}),
     "at [1]['b']: expected a Pair of length 2, received a tuple of length 1"),
    (1, "at the top level: expected a tuple of length 2, received an int"),
])
def test_match_names_the_first_place_where_the_structures_differ(value, message):
    with pytest.raises(_tree.StructureMismatch) as e:
        _tree.match(value, (0, {"a": 0, "b": Pair(0, 0)}))
    assert str(e.value) == message
