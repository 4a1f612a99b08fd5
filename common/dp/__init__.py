"""epsilon-differential privacy by generalization (DiffGen, Mohammed et al.): the exponential
mechanism picks the specializations and numeric split points of a top-down specialization, and
discrete Laplace noise is added to the count of every final group x class value."""
