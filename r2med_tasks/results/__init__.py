"""What a run leaves on disk: its results folder, the identity that decides reuse, its outcomes, and
the exports to the MTEB results repository and to R2MED's generation layout."""
