"""``bizmsg demo``: the tour, on the embedded sandbox: accounts and numbers listed, a template
sent, a failed commit raised, a campaign planned, sent with a journal and run again."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING

from .. import __version__
from .._client import Client
from ..errors import SendRejectedError
from ..models import Template
from ..testing import Sandbox

if TYPE_CHECKING:
    from .options import Subcommands

__all__ = ["add_demo"]


def add_demo(commands: Subcommands, common: argparse.ArgumentParser) -> None:
    """Adds ``demo``; ``common`` holds the options every command takes."""
    demo = commands.add_parser("demo", parents=[common],
                               help="list accounts and numbers and send a template, "
                                    "on the embedded sandbox")
    demo.add_argument("--seed", type=int, default=0,
                      help="seed of the sandbox's generated data (default: 0)")
    demo.set_defaults(run=_demo)


def _demo_campaign(sandbox: Sandbox, client: Client, sender: str) -> None:
    """The bulk sender: a plan, a campaign with a journal, and the same campaign run again,
    which sends nothing (what a restarted job would do after a crash)."""
    import tempfile

    from .._campaign import Message

    template = Template(name="spring_promo", parameters=["SPRING"], language="en")
    # 500 recipients: within the sender account's messaging tier (TIER_1K), so the plan is clean.
    messages = [Message(to=f"86138{i:08d}", from_=sender, template=template) for i in range(500)]
    messages += [messages[0], Message(to="12345", from_=sender, template=template)]
    print(f"\nA campaign of {len(messages):,} messages (one repeated, one with a bad number):")
    plan = client.messages.plan(messages)
    print(f"  plan:    {plan!r}")
    for warning in plan.warnings:
        print(f"           warning: {warning}")
    accepted = sandbox.stats()["accepted"]
    with tempfile.TemporaryDirectory() as directory:
        journal = os.path.join(directory, "spring.db")
        result = client.messages.send_many(messages, journal=journal)
        print(f"  sent:    {result!r}")
        print(f"           {result.failed()[0].error}")
        again = client.messages.send_many(messages, journal=journal)
        print(f"  re-run:  {again!r}")
    print(f"  the service accepted {sandbox.stats()['accepted'] - accepted:,} messages: "
          "none twice, the re-run sent nothing")


def _demo(args: argparse.Namespace) -> int:
    print(f"bizmsg {__version__}: starting the embedded sandbox service...")
    with Sandbox(seed=args.seed) as sandbox, sandbox.client() as client:
        print(f"  listening on {sandbox.base_url} (tenant token {sandbox.token!r})\n")

        accounts = client.business_accounts.list(page_no=1, page_size=20)
        print(f"Business accounts: {accounts.total} in {accounts.pages} page(s)")
        for account in accounts:
            print(
                f"  {account.biz_account_id}  {account.name:<24} {account.status:<8} "
                f"review={account.account_review_status} limit="
                f"{account.chat_business_manager_messaging_limit} "
                f"numbers={len(account.business_phone_numbers)}"
            )

        numbers = client.business_phone_numbers.list(page_no=1, page_size=50)
        print(f"\nBusiness phone numbers: {numbers.total}")
        for number in numbers:
            created = number.create_time.isoformat() if number.create_time else "?"
            print(
                f"  {number.phone_number_id}  {number.display_phone_number:<20} "
                f"{number.status:<12} quality={number.quality_rating:<8} created={created}"
            )

        sender = next((n for n in numbers if n.status == "CONNECTED"), None)
        if sender is None or sender.display_phone_number is None:
            print("no CONNECTED number to send from", file=sys.stderr)
            return 1
        template = Template(name="order_update", parameters=["A-1042", "tomorrow"], language="en-US")
        print(f"\nSending template {template.name!r} from {sender.display_phone_number} ...")
        result = client.messages.send(to="+86 138 0013 8000", from_=sender.display_phone_number,
                                      template=template)
        print(f"  sent: sms_id={result.sms_id} status={result.status} code={result.code} ok={result.ok}")
        print(f"  request id {result.meta.request_id}, {result.meta.attempts} attempt(s), "
              f"{result.meta.elapsed.total_seconds() * 1000:.1f} ms")
        wire = sandbox.sent_messages()[-1]
        print("  the service received:", json.dumps(wire["body"]))

        print("\nA failed commit is an exception, never a quiet result:")
        stranger = "+1 415 555 0100"  # not a number of this tenant
        try:
            client.messages.send(to="8613800138000", from_=stranger, template=template)
        except SendRejectedError as error:
            print(f"  {type(error).__name__}: code={error.code!r} msg={error.msg!r}")

        _demo_campaign(sandbox, client, sender.display_phone_number)
    print("\ndone.")
    return 0
