"""What a run leaves on disk: the layout of a results folder (``layout``), the identity that decides
reuse (``identity``), outcomes (``outcomes``), per-query inspection (``perquery``), and the exports:
to the MTEB results repository (``export``, ``contribution``) and to R2MED's generation layout
(``generations``)."""
