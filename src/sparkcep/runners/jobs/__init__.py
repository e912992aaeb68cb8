"""Jobs beside a run that learn from data or prepare the machine: `fit` (AYAC's delay
models), `mining` (episode rules) and `warmup` (the JVM archive, a first job)."""
