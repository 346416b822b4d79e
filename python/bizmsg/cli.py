"""The ``bizmsg`` command: ``bizmsg demo`` and ``bizmsg sandbox``."""


from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Sequence

from . import __version__
from .errors import BizmsgError, SendRejectedError
from .models import Template
from .testing import Sandbox

DESCRIPTION = (
    "bizmsg: the Business Chat Messaging Service SDK. 'demo' runs the SDK against the embedded "
    "sandbox service; 'sandbox' serves that sandbox on a port, to try with curl."
)


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
        if result.meta is not None:
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
    print("\ndone.")
    return 0


def _sandbox(args: argparse.Namespace) -> int:
    sandbox = Sandbox(
        host=args.host, port=args.port, seed=args.seed, delay=args.delay,
        accounts_per_tenant=args.accounts, tenants=args.tenant or ("acme", "globex"),
    )
    print(f"bizmsg sandbox on {sandbox.base_url}; Ctrl-C stops it.")
    for tenant, token in sandbox.tenant_tokens.items():
        print(f"  tenant {tenant}: Authorization: Bearer {token}")
    print(f"  try: curl -H 'Authorization: Bearer {sandbox.token}' "
          f"'{sandbox.base_url}/v1/chat/businessPhoneNumber?pageNo=1&pageSize=5'")
    sys.stdout.flush()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stop.set())
    try:
        while not stop.wait(0.2):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        sandbox.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bizmsg", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"bizmsg {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="list accounts and numbers and send a template, "
                                            "on the embedded sandbox")
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(run=_demo)

    sandbox = commands.add_parser("sandbox", help="run the sandbox service standalone")
    sandbox.add_argument("--host", default="127.0.0.1")
    sandbox.add_argument("--port", type=int, default=8080)
    sandbox.add_argument("--seed", type=int, default=0)
    sandbox.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    sandbox.add_argument("--accounts", type=int, default=3, help="accounts per tenant")
    sandbox.add_argument("--tenant", action="append", help="a tenant name (repeatable)")
    sandbox.set_defaults(run=_sandbox)

    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except BizmsgError as error:
        print(f"bizmsg: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (`bizmsg demo | head`): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
