"""What the reply check counts as shown to the model: sources of truth, not the model's own words."""

from __future__ import annotations

from sundry.agent.answer import known_identifiers
from sundry.agent.guards import replycheck
from sundry.tooling.messages import Message, ModelRequest, ToolCall

INVENTED = "1Z999AA10123456784"


def _request(*, rejected: bool) -> ModelRequest:
    call = ToolCall(id="t1", name="track_parcel", arguments={"tracking_number": INVENTED})
    result = (
        f"ERROR (guard: id): tracking_number '{INVENTED}' is not in the ID ledger or in a recent tool result."
        if rejected
        else f'{{"tracking_number": "{INVENTED}", "status": "in_transit"}}'
    )
    return ModelRequest(
        model="offline",
        messages=[
            Message(role="system", content="ID LEDGER\norder: SU-10480"),
            Message(role="user", content="Where is my parcel for SU-10480?"),
            Message(role="assistant", tool_calls=[call]),
            Message(role="tool", tool_call_id="t1", tool_name="track_parcel", content=result),
        ],
    )


def test_an_id_a_guard_refused_stays_unknown_to_the_reply_check():
    known = known_identifiers(_request(rejected=True))
    assert "SU-10480" in known and INVENTED not in known
    verdict = replycheck.check_reply(f"Your parcel {INVENTED} is on its way.", known=known, tools=frozenset())
    assert verdict.action != replycheck.POST and INVENTED in verdict.invented


def test_negative_control_the_same_id_returned_by_the_tool_is_known():
    known = known_identifiers(_request(rejected=False))
    assert INVENTED in known
    verdict = replycheck.check_reply(f"Your parcel {INVENTED} is on its way.", known=known, tools=frozenset())
    assert verdict.action == replycheck.POST


def test_a_held_replys_quote_in_a_notice_is_not_a_source_but_a_later_result_is():
    invented = "SU-26675-RF01"
    request = ModelRequest(
        model="offline",
        messages=[
            Message(role="user", content="Did the refund go through?"),
            Message(role="user", content=f"[system notice] Reply held for staff: it names {invented}, found nowhere."),
            Message(
                role="user",
                content='[system notice] later result of an earlier track_parcel call: {"tracking_number": "1Z999AA10123456799"}',
            ),
        ],
    )
    known = known_identifiers(request)
    assert invented not in known and "1Z999AA10123456799" in known
