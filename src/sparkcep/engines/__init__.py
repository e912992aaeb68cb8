"""Engines: one package each, behind one interface (`base`: Engine, Program, RowCheck).
`registry` lists them and chooses one per plan (`choose`, `compile_jobs`); `output` holds
the helpers for the rows programs give."""
