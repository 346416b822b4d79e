"""Send one template to many recipients concurrently, with bounded concurrency.

``send_many`` keeps up to ``concurrency`` sends in flight. A failed commit or a bad number for
one recipient does not stop the others; each message gets an outcome.
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
            numbers = await client.business_phone_numbers.list(page_size=100)
            sender = next(n for n in numbers if n.status == "CONNECTED")
            assert sender.display_phone_number is not None
            template = bizmsg.Template(name="promo", parameters={"code": "SPRING"}, language="en")
            messages = [
                bizmsg.Message(to=to, from_=sender.display_phone_number, template=template)
                for to in RECIPIENTS
            ]

            result = await client.messages.send_many(messages, concurrency=32)

            print(f"{result.counts['sent']} of {len(RECIPIENTS)} sent; "
                  f"the service saw {len(sandbox.sent_messages())} sends")
            for outcome in result:
                if outcome.status == "unknown":
                    print(f"  {RECIPIENTS[outcome.index]}: unknown, re-send with "
                          f"idempotency_key={outcome.idempotency_key}")
                elif not outcome.ok:
                    print(f"  {RECIPIENTS[outcome.index]}: {outcome.status}: "
                          f"{type(outcome.error).__name__}: {outcome.error}")


if __name__ == "__main__":
    asyncio.run(main())
