"""The options of fusing rankings, declared once for every composite that fuses its members' runs,
with ``r2med fuse``'s defaults. Not beside ``fuse``: options are the component contract's, a layer
above the scoring they configure."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ..scoring.fusion import DEFAULT_DEPTH, DEFAULT_METHOD, DEFAULT_RRF_K, FUSION_METHODS
from .options import Options


class FusionOptions(Options):
    """The options ``fuse`` takes."""

    fusion: Literal[FUSION_METHODS] = Field(DEFAULT_METHOD, description="rrf, zscore, minmax or linear")
    weights: tuple[Annotated[float, Field(ge=0)], ...] = Field(
        (), description="comma-separated, one weight per member (default: equal)")
    rrf_k: int = Field(DEFAULT_RRF_K, ge=0, le=1_000_000,  # beyond, 1/(k + r) no longer tells ranks apart in a float
                       description="RRF's k: a document at rank r scores 1/(k + r)")
    depth: int = Field(DEFAULT_DEPTH, ge=1, description="documents taken from each member's run")
