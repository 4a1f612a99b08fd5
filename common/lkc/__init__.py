"""LKC-privacy (Mohammed et al., TKDD 2010) as a method: the top-down specialization engine
(:mod:`fedanon.tds`) with the privacy models of the LKC family (``lkc`` and the plug-ins of
:mod:`fedanon.plugins`) and the utility scores; its :class:`~fedanon.methods.base.Method` is
:data:`fedanon.lkc.method.METHOD`."""
