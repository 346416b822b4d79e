"""What to do when a send's outcome is unknown: re-send with the same idempotency key.

The sandbox is told to process the next send and then drop the connection, so the client
cannot know whether the message went out. bizmsg does not retry it blindly; re-sending with
the error's idempotency key makes the service answer with the original result instead of
sending a second message.
    python examples/reconcile_unknown_outcome.py
"""

from __future__ import annotations

import bizmsg
from bizmsg.testing import Sandbox


def main() -> None:
    with Sandbox() as sandbox, sandbox.client() as client:
        sender = next(n for n in client.business_phone_numbers.iter() if n.status == "CONNECTED")
        assert sender.display_phone_number is not None
        template = bizmsg.Template(name="otp", parameters=["482913"], language="en")
        sandbox.inject("send", cut_connection=True)
        try:
            client.messages.send(to="8613800138000", from_=sender.display_phone_number,
                                 template=template)
        except bizmsg.SendOutcomeUnknownError as error:
            print(f"outcome unknown: {error}")
            result = client.messages.send(to="8613800138000", from_=sender.display_phone_number,
                                          template=template, idempotency_key=error.idempotency_key)
            print(f"reconciled: {result.sms_id}")
        delivered = [m for m in sandbox.sent_messages() if not m["idempotent_replay"]]
        print(f"messages delivered: {len(delivered)}")


if __name__ == "__main__":
    main()
