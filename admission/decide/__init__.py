"""The admission decision as data: floor arithmetic, declared facts, one ordered table of checks.

- ``floors``: floor values and their arithmetic (``combine``, ``next_eligible_us``,
  ``after_start_us``, ``next_eligible_at``) and the bounds ``MAX_US`` / ``MAX_FLOOR_US``; pure.
- ``facts``: each fact a decision reads, declared once (``FACTS``: name, SQLAlchemy Core
  expression, decoder, relaxed-store form, PostgreSQL type, fail-closed bound), and ``Facts``,
  their decoded value. ``admission._facts`` builds the client's statements (per lane, relaxed,
  bulk), ``render`` the server function and ``admission.tick_facts`` the tick's read from these
  declarations, each compiled once per dialect (``_sql.compiled``) into the string the driver runs.
- ``checks``: ``CHECKS``, the decision's ordered rows (reason, outcome, Python predicate, the same
  predicate in SQL, detail, readback form, own next-eligible time). Reserve (``evaluate``, both
  backends) and readback (``judge``) loop over it; the first row that holds decides.
- ``render``: PostgreSQL's ``fg_facts`` and ``fg_admit`` rendered from the facts and ``CHECKS``,
  installed by ``open_store`` after the migrations whenever the rendered text's hash changes.

How to add a check (for example a cap on starts per window):

1. If it needs a value the decision does not read yet, declare one ``Fact`` in ``facts.FACTS``:
   its name and short name (``f.<short>`` in the checks' SQL), its Core expression (a scalar
   subquery over the tables of ``admission._schema`` and the parameters of ``_sql``: ``G A X XR
   T TR NOW LIM``; constants as ``literal_column``/``text_value``, never Python values, which
   ``_sql.compiled`` refuses), its PostgreSQL type, its decoder and ``bound`` when it is a
   stored time, its ``per_row`` form for the bulk read (grouped by the lane's columns it matches),
   and the ``Facts`` field it fills (``field``), which you add to ``Facts`` beside it. The
   client's statements (per lane, relaxed, bulk), their decoding into ``Facts``, PostgreSQL's
   function (its row, OUT columns and fail-closed bounds) and the table test's generated facts all
   follow from the declaration; ``facts`` refuses to load when ``Facts`` and ``FACTS`` disagree,
   and ``admission._facts`` when the bulk read cannot match the fact to lanes.
2. Add one ``Check`` row to ``checks.CHECKS`` at its place in the order: a reason (a new
   ``Reason`` member, declared in the same file above the rows, when it is a new kind of refusal), its ``Outcome``, ``holds`` (the
   predicate in Python), ``sql`` (the same predicate over ``f.<fact>`` and ``p_<param>``), its
   detail, a ``Readback`` form if readback should show it (its status one of
   ``checks.EligibilityStatus``, beside it), ``reports_next=False`` when its denial says nothing of the
   lane's next eligible time (a host then plans from a read: ``checks.PLANNED_BY_DECISION``),
   ``until`` when it can deny without a next time (what ends it, in words: a blocked hook says
   so), and ``next_us`` when it waits for time (the decision reports the latest of the checks').

Nothing else changes by hand: ``tests/test_decide_table.py`` holds every row's Python and SQL
forms together on generated facts, on SQLite and PostgreSQL, and the store installs the new
function text at its next open (no migration). Files a new check touches: ``checks.py`` alone
over existing facts (its row, and its ``Reason`` member when it is a new kind of refusal), plus
``facts.py`` for a new fact: two at most (``admission.decisions`` re-exports ``Reason``, ``Phase``
and ``EligibilityStatus``; the reasons live beside the rows so that a new one is not a third
file). Counted with a check ``lane_paused`` (deny an automatic start while the lane's automation is
paused) over a new fact on ``fg_automations``: nine files before these derivations (the README's
list of reasons among them), two after.

A new value of a rule is more: the goal floor across agents (a rule column, ``across_agents``, in
``RULE_COLUMNS``, and the goal's latest start as a fact) also touched ``floors.py`` (its
arithmetic), ``render.py`` (the function folds the rules' floors in SQL by hand), the rule decoder
(``policies.rule_ref``), the host's bulk planner (``gate.next_eligible_many``), the limited lanes'
client check (``_limit_check``, for the goal's lock) and an index (a migration).
"""

from __future__ import annotations

from .checks import CHECKS as CHECKS
from .checks import Check as Check
from .checks import Outcome as Outcome
from .checks import Reason as Reason
from .facts import FACTS as FACTS
from .facts import Fact as Fact
from .facts import Facts as Facts
from .floors import MAX_FLOOR_US as MAX_FLOOR_US
from .floors import MAX_US as MAX_US
from .floors import after_start_us as after_start_us
from .floors import combine as combine
from .floors import next_eligible_at as next_eligible_at
from .floors import next_eligible_us as next_eligible_us
