"""JSON Schema → regex, our own: every keyword enforced exactly or refused by name.

The schema is compiled to a :mod:`...regex.tree` tree (shared sub-schemas stay shared), which the
byte automaton consumes directly; :func:`json_schema_to_regex` prints it. Differences from
outlines-core's builder, on purpose:

* ``pattern`` has JSON Schema's search semantics (unanchored unless ``^``/``$``), is grouped,
  and is matched against the *decoded* string (escapes in the JSON text are accounted for);
  it is intersected with ``minLength``/``maxLength``/``format`` instead of being dropped.
* ``allOf`` merges schemas; ``anyOf`` distributes over the surrounding keywords; ``oneOf`` is
  an alternation only when its branches are provably disjoint, else refused.
* ``additionalProperties`` (false, true, schema) is honoured next to ``properties``, and
  additional keys can never repeat a declared name; ``patternProperties``, ``propertyNames``,
  ``min/maxProperties``, ``dependentRequired``/``dependentSchemas`` are enforced.
* Boolean and type-less sub-schemas work; numeric bounds compile to digit regexes and
  ``multipleOf`` (any positive divisor) to last-digit regexes or a residue automaton over the
  digits; ``not``, ``if/then/else`` are enforced for the forms that reduce to the above.
* Objects keep the schema's property order (declared properties first, then additional ones).

Bounds that make the language regular are explicit options: the recursion depth of ``$ref``
cycles, the nesting depth of free-form values, and optional length caps for strings, arrays,
additional properties and number digits (``JsonSchemaOptions``).

Modules in dependency order (each imports only modules listed before it):

* :mod:`.options` -- :class:`JsonSchemaOptions`, the compile bounds;
* :mod:`.number_ranges`, :mod:`.decimal_residues` -- numeric bounds and ``multipleOf`` as digit
  regexes and residue automata over the digits (regex trees only, no schema);
* :mod:`.facts` -- :class:`~.facts.Facts`, the normalised conjunction of keywords at one place;
* :mod:`.strings`, :mod:`.formats` -- JSON string contents and ``format`` regexes;
* :mod:`.document` -- the schema document: loading, draft, ``$ref``/anchors, recursion;
* :mod:`.context` -- the protocols the handlers and builders use instead of the compiler;
* :mod:`.keywords` -- the keyword table: one handler per keyword, folding it into facts;
* :mod:`.property_schemas`, :mod:`.negation`, :mod:`.objects`, :mod:`.arrays`,
  :mod:`.numbers` -- ``not``/``oneOf`` reasoning and the per-type builders;
* :mod:`.compiler` -- :class:`SchemaCompiler` (facts to regex trees) and the entry points.

:mod:`.witness` (finding an accepted spelling of an instance) serves tests and benchmarks.
"""

from .compiler import SchemaCompiler, json_schema_to_node, json_schema_to_regex
from .document import load_schema
from .options import JsonSchemaOptions

__all__ = [
    "JsonSchemaOptions",
    "SchemaCompiler",
    "json_schema_to_node",
    "json_schema_to_regex",
    "load_schema",
]
