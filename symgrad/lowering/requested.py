"""Only the requested gradients computed: a gradient's statements grouped by which of its
results (one per input) read them, each group run when the caller asks for one of those
results (`needs_grad`, which autograd's `ctx.needs_input_grad` fills). Statements every
result reads run unconditionally; a statement some read is run when one of them is asked for.

Applied to a gradient function just before it is printed, for a target whose caller knows
which gradients it wants (PyTorch's); the IR it reads is left as it is.
"""

from __future__ import annotations

import dataclasses

from symgrad import ir


def requested_only(function: ir.Function) -> ir.Function | None:
    """`function` (a gradient: one result per input) with each statement that not every
    result reads inside an `ir.Requested`; None where every statement serves every result
    (nothing to leave out: the function takes no `needs_grad`)."""
    branches = [_branch_requested(branch, function.results) for branch in function.branches]
    if all(new is None for new in branches):
        return None
    return dataclasses.replace(function, branches=tuple(
        old if new is None else new for old, new in zip(function.branches, branches)))


def _branch_requested(branch: ir.Branch, results) -> ir.Branch | None:
    body = _body_requested(branch.body, results)
    guarded = None if branch.guarded_body is None else _body_requested(branch.guarded_body, results)
    if body is None and guarded is None:
        return None
    return dataclasses.replace(branch, body=body or branch.body,
                               guarded_body=guarded or branch.guarded_body)


def _body_requested(body: tuple, results) -> tuple | None:
    """`body` with its statements grouped by the results that read them (consecutive
    statements read by the same results: one `Requested`), the results it may leave unset
    set to None first; None where every statement serves every result."""
    readers = _readers(body, results)
    live = frozenset().union(*readers)
    if len(live) < 2 or all(r in (frozenset(), live) for r in readers):
        return None
    grouped, unset = [], []
    for statement, read_by in zip(body, readers):
        if read_by in (frozenset(), live):
            grouped.append(statement)
            continue
        if grouped and isinstance(grouped[-1], ir.Requested) and set(grouped[-1].grads) == read_by:
            grouped[-1] = ir.Requested(grouped[-1].grads, grouped[-1].body + (statement,))
        else:
            grouped.append(ir.Requested(tuple(sorted(read_by)), (statement,)))
        unset += [t for t in _targets(statement) if t in results and t not in unset]
    return (ir.Unset(tuple(sorted(unset, key=results.index))),) + tuple(grouped) if unset else tuple(grouped)


def reads_by_result(function: ir.Function, value_reads=ir.reads) -> list[tuple[set, set]]:
    """For each result of `function` (one per input): (the variables whose values computing it
    reads, every variable it names), over every variant. Values are followed back from the
    result: an array read only for its shape (`t1 = x_split.shape[-1]`) makes what it was
    computed from no value read. `value_reads(value)`: the variables an IR value reads the
    values of."""
    found = [(set(), set()) for _ in function.results]
    for branch in function.branches:
        for body in (branch.body, branch.guarded_body):
            if body is None:
                continue
            readers = _readers(body, function.results)
            for k, result in enumerate(function.results):
                if result is None:
                    continue
                run = list(function.prologue) + [s for s, read_by in zip(body, readers) if k in read_by or not read_by]
                values, named = _followed_back(run, result, value_reads)
                found[k][0].update(values)
                found[k][1].update(named)
    return found


def _followed_back(run: list, result: str, value_reads) -> tuple[set, set]:
    """(the variables whose values `run`'s statements read for `result`'s value, every
    variable they name for it), followed back from `result`: a statement counts where what it
    assigns is needed."""
    valued, named = {result}, {result}
    for statement in reversed(run):
        inner = ir.statements([statement])  # a recomputation's statements, its stages read by its guard
        if isinstance(statement, ir.Recompute) and any(_targets(s) & named for s in inner):
            named |= set(statement.stages)
        for s in reversed(inner):
            if _targets(s) & named:
                named |= ir.names_in(s.value)
            if _targets(s) & valued:
                valued |= value_reads(s.value)
    return valued, named


def _readers(body: tuple, results) -> list[frozenset]:
    """For each statement of `body`, the positions of the results whose values depend on it:
    each result's needs followed back from the end of the body."""
    readers = [set() for _ in body]
    for k, result in enumerate(results):
        if result is None:
            continue
        needed = {result}
        for n in reversed(range(len(body))):
            if _targets(body[n]) & needed:
                readers[n].add(k)
                needed |= names_read(body[n])
    return [frozenset(r) for r in readers]


def _targets(statement) -> set[str]:
    """The variables `statement` assigns ("a, b" unpacks several)."""
    if isinstance(statement, ir.Recompute):
        return set(statement.stages) | {t for s in statement.body for t in _targets(s)}
    return {name.strip() for name in statement.target.split(",")}


def names_read(statement) -> set[str]:
    """Every variable `statement` reads, for its value or its shape."""
    if isinstance(statement, ir.Recompute):
        return set(statement.stages) | set().union(*(ir.names_in(s.value) for s in statement.body))
    return ir.names_in(statement.value)
