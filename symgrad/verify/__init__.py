"""Verification: derived gradients against finite differences and hand-written references.

Beside the derivation pipeline, reading what it wrote; its modules, lowest first (each imports
only those above it):

| module | its one job |
| --- | --- |
| `ops_under_test` | each declaration with its generated modules, imported |
| `shapes` | the shapes an op is compared on: sizes per dimension, batch axes, broadcasting |
| `cases` | the inputs an op is compared on: values in its domain, edge values |
| `compare` | two gradients compared element by element, with findings |
| `sources` | where a gradient comes from: a generated module, a user's file |
| `tf_sources` | TensorFlow as a source: a gradient function on a real op, its registry |
| `report` | results as a table, JSON and an exit status |
| `differences` | finite differences along a direction, and a gradient judged against them |
| `check` | against central differences of the derived forward |
| `verdict` | which side finite differences agree with, where two gradients differ |
| `diff` | against a hand-written gradient |
| `extremes` | at extreme inputs: a NaN or inf gradient where the derivative is finite |
| `second_order` | the gradient of the gradient, `--order 2` |
| `runner` | many ops over worker processes |
| `selfcheck` | what `symgrad derive` runs on what it generated before writing it |
| `coverage` | which of TensorFlow's hand-written gradients the declarations cover |
"""
