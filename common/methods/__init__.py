"""The methods (LKC-privacy with its plug-in models, DiffGen, (k, k^m)-anonymity): what a method
is (:mod:`fedanon.methods.base`) and the one place that knows them by name
(:mod:`fedanon.methods.registry`)."""
