"""(k, k^m)-anonymity for records with demographics plus a set of diagnosis codes (RT-datasets).

ArtUC (Poulis, Loukides et al., *Anonymizing data with relational and transaction attributes
under utility constraints*), self-contained: its own run spec (``[privacy] model = "kkm"``),
table reader, metrics (NCP, UL, ARE), the algorithm (record grouping, cluster formation,
cluster merging, GenDiag / CBA adaptation), Algorithm 2 (progressive relaxation), an
independent recount of the release (audit), a synthetic RT-dataset generator and experiments.

Readings of the seed where its extracted text is garbled are listed in ``common/kkm/artuc.py``
and in the README section "Diagnosis codes: (k, k^m)-anonymity".
"""
