"""Stage 2, the byte automaton: derivative terms of a regex tree and the lazy DFA over them.

* :mod:`.term` -- interned byte-level terms; :mod:`.derivatives` -- lowering a tree to terms
  and their byte derivatives (:class:`~.derivatives.TermBuilder`);
* :mod:`.liveness` -- whether an intersection or complement term can still match (budgeted);
  :mod:`.intersection_clamp` -- length counters clamped inside intersections;
* :mod:`.lazy_dfa` -- the DFA whose rows are built on first visit (states, accepting, budgets);
  :mod:`.compressed_fsm` -- forced byte runs (what jump-forward emits);
* :mod:`.work_clock` -- the budgets' clock (wall time less garbage-collection pauses).

May import :mod:`radixlm.fsm.errors` and :mod:`radixlm.fsm.regex`. No re-exports.
"""
