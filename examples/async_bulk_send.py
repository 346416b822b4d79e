"""Send one template to many recipients concurrently, with bounded concurrency.

A failed commit for one recipient does not stop the others; each outcome is reported.
    python examples/async_bulk_send.py
"""

from __future__ import annotations

import asyncio

import bizmsg
from bizmsg.testing import Sandbox

RECIPIENTS = [f"86138{i:08d}" for i in range(200)] + ["12"]  # the last one is invalid


async def main() -> None:
    with Sandbox() as sandbox:
        async with sandbox.async_client() as client:
            connected = [
                n async for n in client.business_phone_numbers.iter() if n.status == "CONNECTED"
            ]
            sender = connected[0]
            assert sender.display_phone_number is not None
            limit = asyncio.Semaphore(32)
            template = bizmsg.Template(name="promo", parameters={"code": "SPRING"}, language="en")

            async def send(to: str) -> str:
                async with limit:
                    try:
                        result = await client.messages.send(
                            to=to, from_=sender.display_phone_number or "", template=template
                        )
                        return f"ok {result.sms_id}"
                    except bizmsg.SendOutcomeUnknownError as error:
                        return f"unknown, re-send with idempotency_key={error.idempotency_key}"
                    except bizmsg.BizmsgError as error:
                        return f"failed: {type(error).__name__}: {error}"

            outcomes = await asyncio.gather(*(send(to) for to in RECIPIENTS))
            sent = sum(o.startswith("ok") for o in outcomes)
            print(f"{sent} of {len(RECIPIENTS)} sent; the service saw {len(sandbox.sent_messages())} sends")
            for to, outcome in zip(RECIPIENTS, outcomes):
                if not outcome.startswith("ok"):
                    print(f"  {to}: {outcome}")


if __name__ == "__main__":
    asyncio.run(main())
