"""`request_staff_follow_up`: the agent hands the case to people, and the ticket says so.

Whenever the agent tells a customer that staff will follow up, it calls this:
the ticket is flagged for attention with the reason (the queue's "Any
attention" and "Follow-up promised" filters find it; the desk shows it at the
top of the ticket), so the promise is kept by someone.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from sundry.tickets.attention import follow_up_request
from sundry.tooling.tools import Tool, ToolContext, register


class FollowUpArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)
    reason: str = Field(
        min_length=3,
        max_length=160,
        description="What staff must follow up on, in a few words, e.g. 'second refund on the air "
        "fryer order needs a decision'.",
    )


class FollowUpResult(BaseModel):
    flagged: bool
    attention: str


def request_staff_follow_up(ctx: ToolContext, args: FollowUpArgs) -> FollowUpResult:
    attention = follow_up_request(ticket_id=ctx.ticket_id, reason=args.reason, turn=ctx.turn)
    return FollowUpResult(flagged=True, attention=attention)


register(
    Tool(
        name="request_staff_follow_up",
        description="Ask a member of staff to follow up on this case. Call it whenever you tell the customer that "
        "staff will follow up or look into something; give the reason in a few words. It flags the ticket "
        "for staff; it does not end the conversation.",
        args_model=FollowUpArgs,
        result_model=FollowUpResult,
        run=request_staff_follow_up,
        local=True,
    )
)
