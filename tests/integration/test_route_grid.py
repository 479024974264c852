"""The route x transform grid (tests/differential/routes.py) on every installed backend, each in
its own process: every way a differentiated value reaches a custom-gradient f, under every
transform, gives plain autodiff's value or a named CustomGradientError — no cell is silent
(a different value) or bare (another exception) — and docs/convention.md's table is the grid's.
"""

import functools
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "differential"))
import routes


@functools.cache
def _grid(backend: str) -> tuple:
    return tuple(routes.run_all(backends=(backend,))[backend])


def _rows(backend):
    if not routes.installed(backend):
        pytest.skip(f"route grid: {backend} is not installed here")
    return _grid(backend)


@pytest.mark.parametrize("backend", routes.AUTODIFF)
def test_no_cell_is_silent_or_bare(backend):
    rows = _rows(backend)
    counts = routes.counts(rows)
    print(f"{backend}: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    wrong = [r for r in rows if r["status"] in ("silent", "bare")
             and f"{backend}: " + routes.cell_id(r["route"], r["own"], r["transform"])
             not in routes.KNOWN_DEFECTS]
    for r in rows:
        key = f"{backend}: " + routes.cell_id(r["route"], r["own"], r["transform"])
        if key in routes.KNOWN_DEFECTS:
            print(f"known defect ({r['status']}): {key}: {routes.KNOWN_DEFECTS[key]}")
    assert not wrong, "\n".join(
        f"{r['status']}: {routes.cell_id(r['route'], r['own'], r['transform'])}: {r['detail']}"
        for r in wrong)
    # the grid is the one the docs describe: every route and transform ran
    assert counts["ok"] > 0 and counts["refused"] > 0
    assert len(rows) == len(routes.cells(backend))


def test_the_docs_table_is_the_grid():
    missing = [b for b in routes.AUTODIFF if not routes.installed(b)]
    if missing:
        pytest.skip(f"route grid: {', '.join(missing)} not installed here, so the table of "
                    "docs/convention.md cannot be regenerated whole")
    table = routes.grid_table({b: list(_grid(b)) for b in routes.AUTODIFF})
    assert routes.documented_table() == table, (
        "docs/convention.md's route grid differs from the grid; rewrite it with "
        "`python tests/differential/routes.py --all --write-docs`")


def test_one_verdict_on_every_backend():
    """The backend-agnostic call (customgrad.grad, customgrad.jvp) of the same route gives the
    same verdict on jax, tensorflow and torch: docs/convention.md's tables (the grid's, by the
    test above) agree row by row wherever the backends share the row."""
    grids = routes.parse_table(routes.documented_table())
    assert set(grids) == set(routes.AUTODIFF)
    shared = [row for row, t in grids["jax"] if t == "customgrad.grad"
              and all((row, t) in grids[b] for b in grids)]
    assert len(shared) > 20, shared  # the comparison compares something
    differences = routes.verdict_differences(grids)
    assert not differences, "\n".join(differences)


def test_a_verdict_difference_is_found():
    """The comparison fails on one backend giving grad_fn's value where another refuses."""
    table = routes.documented_table()
    grids = routes.parse_table(table)
    row = "attribute"
    grids["torch"][(row, "customgrad.grad")] = "✓"
    grids["jax"][(row, "customgrad.grad")] = "R"
    assert any(d.startswith("attribute | customgrad.grad:")
               for d in routes.verdict_differences(grids))
