"""Running external conformance suites against qcodegen (tosa_sut: the TOSA conformance suite)."""
