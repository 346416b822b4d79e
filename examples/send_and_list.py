"""List numbers and send one template, synchronously.

Runs against the embedded sandbox, or against a real service when BIZMSG_TOKEN and
BIZMSG_BASE_URL are set:  python examples/send_and_list.py
"""

from __future__ import annotations

import os
from contextlib import ExitStack

import bizmsg
from bizmsg.testing import Sandbox


def main() -> None:
    with ExitStack() as stack:
        if os.environ.get("BIZMSG_BASE_URL"):
            client = stack.enter_context(bizmsg.Client())
        else:
            client = stack.enter_context(stack.enter_context(Sandbox()).client())

        connected = [n for n in client.business_phone_numbers.iter() if n.status == "CONNECTED"]
        print(f"{len(connected)} connected numbers")
        sender = connected[0]
        assert sender.display_phone_number is not None

        result = client.messages.send(
            to="+86 138 0013 8000",
            from_=sender.display_phone_number,
            template=bizmsg.Template(name="order_update", parameters=["A-1042"], language="en_US"),
        )
        print(f"sent {result.sms_id} ({result.status}); request id {result.meta and result.meta.request_id}")


if __name__ == "__main__":
    main()
