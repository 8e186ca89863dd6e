"""Small dense linear algebra written in the language itself (inlined into kernels)."""
