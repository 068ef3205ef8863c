"""The /rank request and response as pydantic models: the limits a request must keep are its schema, so a
request outside them is a 422 naming the field and the OpenAPI document says exactly what is accepted."""

from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from solaris.data.idmap import MAX_RAW_ID_CHARS, canonical_id
from solaris.enrichment.tiers import TIER_NAMES
from solaris.models.features import MAX_EXACT_ID
from solaris.serving.metrics import STORE_FAILURES


def _json_integer(value: object) -> object:
    """JSON Schema's integer: 7 and 7.0, never "7", 7.5 or true (an id that is a string is a client bug)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a JSON integer")
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(f"must be a JSON integer, got {value}")
    return int(value)


def _json_id(value: object) -> object:
    """A raw id: a JSON string as it is, else a JSON integer."""
    return value if isinstance(value, str) else _json_integer(value)


def _json_time(value: object) -> object:
    """A time as JSON Schema's date-time: a string. Pydantic would also read a number, as Unix seconds or
    milliseconds by its size, so ``"at": 0`` ranked as of 1970 where the schema says a date-time string."""
    if not isinstance(value, str):
        raise ValueError("must be an ISO 8601 datetime with a timezone, as a JSON string")
    return value


JsonInt = Annotated[int, BeforeValidator(_json_integer)]
JsonTime = Annotated[AwareDatetime, BeforeValidator(_json_time)]
Id = Annotated[JsonInt, Field(ge=0, lt=MAX_EXACT_ID)]
RawId = Annotated[
    Annotated[int, Field(ge=-(2**63), lt=2**63)] | Annotated[str, Field(min_length=1, max_length=MAX_RAW_ID_CHARS)],
    BeforeValidator(_json_id),
]
MAX_POSITION = 1000


class RankResponse(BaseModel):
    user_id: int | str = Field(description="the user id as sent")
    vm: str = Field(description="the VM that scored: the request's, or the lead")
    vm_version: str
    embedding_version: str
    scores: list[float] = Field(
        description="the VM's label probability (click, conversion) per item, in the request's order"
    )
    tiers: list[Literal[TIER_NAMES]] = Field(description="the tier that fed each item")  # type: ignore[valid-type]
    store: Literal[("ok", *STORE_FAILURES)] = Field(  # type: ignore[valid-type]
        description="ok, or why every item was served tier none: the store erred, timed out, was overloaded, or"
        " does not hold the VM's embedding version yet (version_missing)"
    )


def rank_request_model(max_candidates: int, vms: tuple[str, ...], raw_ids: bool = False) -> type[BaseModel]:
    """The request schema of a service serving ``vms``: naming another VM is a 422 that lists these. With
    ``raw_ids`` (a world with an id map) ids are text or any int64, else dense ids in [0, 2**24)."""
    served = Literal[vms]  # type: ignore[valid-type]
    SomeId = RawId if raw_ids else Id  # noqa: N806 - a type

    class RankRequest(BaseModel):
        model_config = ConfigDict(extra="forbid")
        vm: served | None = Field(None, description=f"the VM to score with (default: {vms[0]})")  # type: ignore[valid-type]
        user_id: SomeId  # type: ignore[valid-type]
        items: list[SomeId] = Field(  # type: ignore[valid-type]
            min_length=1,
            max_length=max_candidates,
            json_schema_extra={"uniqueItems": True},
            description="candidate item ids",
        )
        positions: list[Annotated[JsonInt, Field(ge=0, le=MAX_POSITION)]] | None = Field(
            None, description="slot per item (default: all at the top slot)"
        )
        request_id: Annotated[JsonInt, Field(ge=0, lt=2**63)] | None = None
        at: JsonTime | None = Field(None, description="the time to rank as of (default: now)")

        @model_validator(mode="after")
        def _consistent(self) -> "RankRequest":
            keys = [canonical_id(i) for i in self.items] if raw_ids else self.items  # 7 and "7" are one raw id
            if len(set(keys)) != len(keys):
                seen: set[int | str] = set()
                duplicate = next(i for i in keys if i in seen or seen.add(i))
                raise ValueError(f"items: item id {duplicate} appears more than once")
            if self.positions is not None and len(self.positions) != len(self.items):
                raise ValueError(f"positions: {len(self.positions)} positions for {len(self.items)} items")
            return self

    return RankRequest
