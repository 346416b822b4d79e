"""``bizmsg send``: one template message (``--to``), or every message of a file (``--file``,
run by ``send_file.py``, imported only then)."""

from __future__ import annotations

import argparse
import sys
import uuid
from typing import TYPE_CHECKING

from ..models import Template, TemplateParameters
from .options import (
    add_connection_options,
    add_output_options,
    connect,
    int_in,
    output_of,
    positive,
)
from .output import SEND_RESULT, write_result
from .status import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, CommandError

if TYPE_CHECKING:
    from .options import Subcommands

__all__ = ["DEFAULT_CONCURRENCY", "INPUT_FORMATS", "add_send", "reconcile_hint"]

#: Requests in flight at most for --file, unless --concurrency says otherwise.
DEFAULT_CONCURRENCY = 64
#: What --format and --results-format take (message_file.py reads, results_file.py writes).
INPUT_FORMATS = ("csv", "jsonl")


def reconcile_hint(idempotency_key: str) -> str:
    """What to do about a send that may or may not have gone out."""
    return (
        "check whether it arrived; to send it again, re-run with --idempotency-key "
        f"{idempotency_key} (a service that honours the key, as the sandbox does, then answers "
        "with the first result instead of sending twice)"
    )


def add_send(commands: Subcommands, common: argparse.ArgumentParser) -> None:
    """Adds ``send``; ``common`` holds the options every command takes."""
    send = commands.add_parser(
        "send", parents=[common], help="send a template message, or many from a file",
        description="Sends a template message from one of your business phone numbers "
                    "(--to), or every message of a CSV or JSON Lines file (--file).",
        epilog=_SEND_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_message_options(send)
    _add_bulk_options(send)
    add_connection_options(send)
    add_output_options(send, SEND_RESULT)
    send.set_defaults(run=_send)


_SEND_EPILOG = """\
exit status of one message (--to): 0 sent; 3 rejected: the service reported a failed
commit (its code and msg are shown); 4 outcome unknown: the message may or may not have
been sent, and the Idempotency-Key it went out with is shown, to reconcile with. Every
send carries an Idempotency-Key: a fresh one, or the one given with --idempotency-key.

many messages (--file FILE):
  bizmsg send --file messages.csv --results results.csv --journal campaign.db
  FILE is CSV (a header row, then one message per row) or JSON Lines (one JSON
  object per line), told by its extension (.csv, .jsonl, .ndjson) or --format;
  "-" reads stdin (with --format). It is read as the messages go out, so a file
  of any size takes little memory. Columns (JSON keys), names without case:
    to                  the recipient (required in every row)
    from (or from_)     the business number to send from
    template (or name)  the template's name (JSON Lines: also an object with
                        name, language and parameters)
    language            the template's language code
    parameters          the parameters as one string, sent unchanged (JSON Lines:
                        a string, a list of strings or an object, as given)
    params              or: a JSON list of strings, e.g. ["A-1042", "tomorrow"]
    param1 ... paramN   or: one parameter per column, in number order, up to the
                        last non-empty one (an empty one before it is sent as "")
    idempotency_key     optional: the message's Idempotency-Key
  An empty cell (or a JSON null) counts as left out. --from, --template,
  --language, and --param or --parameters, are the values of the rows that leave
  them out; a row with no parameters at all and no default sends an empty list.
  A row that gives its parameters in two ways, or cannot be read, is not sent: it
  is a failed row of the results, like an invalid phone number. A CSV row is one
  line: a quote left open at the end of its line, or fewer cells than the header,
  makes it a failed row (a CSV cell cannot span lines; JSON Lines carries text
  with line breaks). Exact repeats
  (same to, from, template) are sent once, the others skipped (--no-dedupe sends
  them all). Other columns are copied to the results.

  --results FILE (or "-", stdout): one row per message, written as the outcomes
  arrive (so not in input order), CSV or JSON Lines by its extension
  (--results-format otherwise; stdout: the input's format). Columns: index (the
  message's position in the input, from 0; blank lines are not counted), to,
  status (sent, rejected, unknown, failed, skipped), ok, sms_id, code, msg,
  error, idempotency_key, duplicate_of, reason, then the input's other columns
  (those of a CSV input's header; for a JSON Lines input in a JSON Lines results
  file, each row's other keys). Without --results, the messages that were not
  sent are listed on stderr (the first 20).

  A line on stderr sums up the run: messages per status, time and rate; a
  progress bar shows above it on a terminal when tqdm is installed
  (pip install 'bizmsg[progress]').

  --journal FILE makes the campaign resumable: after Ctrl-C, a crash or a lost
  connection, run the same command again (same file, same journal) and only the
  messages never sent go out; those done earlier are skipped. A message that
  was in flight when a run crashed (or was abandoned by a second Ctrl-C) is
  unknown: add --resend-unknown to send it again with the same Idempotency-Key
  (safe with a service that honours the key, as the sandbox does). --dry-run sends nothing: it checks every message, looks
  the senders up and prints the plan (counts, senders with problems, accounts
  against their messaging tier, warnings, estimated duration); the sending
  options may stay on the command line.

exit status with --file:
  0    every message sent (or skipped: a duplicate, or done by an earlier run);
       --dry-run: the plan is OK
  1    the campaign itself failed: its journal cannot be used, the senders cannot
       be looked up (--pace auto), the file cannot be read on, the results cannot
       be written, the service could not be reached; what was done so far is
       summed up
  2    usage: a bad option, a missing file or column; or the service refused the
       token (401): the campaign stops at once, with one line
  3    some messages were rejected or failed (and none is unknown); --dry-run:
       the plan is not OK (invalid messages, senders that cannot send, accounts
       past their tier)
  4    the outcome of some messages is unknown (wins over 3)
  130  interrupted (Ctrl-C): no new message is taken, those in flight finish and
       are written to the results, and the summary is printed; Ctrl-C again
       abandons them (their outcome is then unknown)
  143  stopped by SIGTERM (systemd, Docker, Kubernetes, timeout): as for Ctrl-C;
       run the same command again to send the rest
"""


def _add_message_options(send: argparse.ArgumentParser) -> None:
    # Checked by _send rather than required by argparse: `send --file` takes the messages
    # from a file instead, with these as the defaults of its rows.
    message = send.add_argument_group(
        "the message (all required; with --file, the values of rows that leave them out)"
    )
    message.add_argument("--to", metavar="NUMBER",
                         help="the recipient's phone number: 8 to 15 digits with the country "
                              "code; +, spaces, dashes, dots and parentheses are ignored")
    message.add_argument("--from", dest="from_", metavar="NUMBER",
                         help="the CONNECTED business phone number of yours to send from")
    message.add_argument("--template", metavar="NAME", help="the template's name")
    message.add_argument("--language", metavar="CODE",
                         help="the template's language code: en, en_US, es_419, ... "
                              "(en-US is sent as en_US)")
    parameters = send.add_argument_group(
        "template parameters (--param or --parameters; none: an empty list)"
    ).add_mutually_exclusive_group()
    parameters.add_argument("--param", action="append", metavar="VALUE",
                            help="a template parameter; repeat it for each, in order; they "
                                 "are sent as a JSON list of strings")
    parameters.add_argument("--parameters", metavar="TEXT",
                            help="the template parameters as one string, sent unchanged "
                                 "(e.g. a JSON object)")
    send.add_argument("--idempotency-key", metavar="KEY",
                      help="the Idempotency-Key to send with (default: a fresh one); give "
                           "the key an interrupted or unknown send printed to re-send it")


def _add_bulk_options(send: argparse.ArgumentParser) -> None:
    bulk = send.add_argument_group("many messages (see below)")
    bulk.add_argument("--file", metavar="FILE",
                      help="send every message of this CSV or JSON Lines file (- for stdin) "
                           "instead of one message (--to)")
    bulk.add_argument("--format", choices=INPUT_FORMATS,
                      help="the format of --file (default: from its extension)")
    bulk.add_argument("--results", metavar="FILE",
                      help="write one row per message to FILE (- for stdout) as the outcomes "
                           "arrive; replaced if it exists")
    bulk.add_argument("--results-format", choices=INPUT_FORMATS,
                      help="the format of --results (default: from its extension; for "
                           "stdout, the input's format)")
    bulk.add_argument("--concurrency", type=int_in(1, None), metavar="N",
                      help=f"requests in flight at most (default: {DEFAULT_CONCURRENCY})")
    bulk.add_argument("--rate", type=positive, metavar="N",
                      help="send at most N messages per second in all (default: as fast as "
                           "the service answers)")
    bulk.add_argument("--pace", choices=("auto",),
                      help="auto: look every sender up first, fail the messages of senders "
                           "that cannot send, pace each sender under its throughput and warn "
                           "past an account's messaging tier")
    bulk.add_argument("--journal", metavar="FILE",
                      help="record every message in this SQLite file, so that running the "
                           "same command again after Ctrl-C or a crash sends only what was "
                           "never sent")
    bulk.add_argument("--campaign-id", metavar="ID",
                      help="derive every Idempotency-Key from this id (and the message), so "
                           "that a re-run sends with the same keys (default: the journal's, "
                           "else fresh keys)")
    bulk.add_argument("--resend-unknown", action="store_true",
                      help="with --journal: send again, with the same Idempotency-Key, the "
                           "messages an earlier run left unknown (default: report them "
                           "unknown again)")
    bulk.add_argument("--no-enforce-tier", action="store_true",
                      help="with --pace auto: send the messages to new recipients past an "
                           "account's messaging tier anyway (default: they fail up front, as "
                           "the platform would refuse them)")
    bulk.add_argument("--no-dedupe", action="store_true",
                      help="send exact repeats too (default: a message with the same to, "
                           "from and template as an earlier one is skipped)")
    bulk.add_argument("--stop-on-error", action="store_true",
                      help="stop at the first message that is not sent (the rest are "
                           "skipped)")
    bulk.add_argument("--unreachable-after", type=int_in(0, None), metavar="N",
                      help="stop when N messages in a row could not reach the service (no "
                           "connection, a timeout before the request left) and nothing got "
                           "through for --unreachable-for; the rest are skipped, exit 1 "
                           "(default: 20; 0: never stop for it)")
    bulk.add_argument("--unreachable-for", type=positive, metavar="SECONDS",
                      help="how long the service must stay unreachable, after "
                           "--unreachable-after failures, before the campaign stops "
                           "(default: 5)")
    bulk.add_argument("--dry-run", action="store_true",
                      help="send nothing: check every message, look the senders up and print "
                           "the plan; exit 0 if it is OK, 3 if not")
    bulk.add_argument("--no-progress", action="store_true",
                      help="no progress bar, even on a terminal")


_MESSAGE_OPTIONS = (("--to", "to"), ("--from", "from_"), ("--template", "template"),
                    ("--language", "language"))


#: The options of --file, with the value each has when not given.
_BULK_OPTIONS = (("--format", "format", None), ("--results", "results", None),
                 ("--results-format", "results_format", None),
                 ("--concurrency", "concurrency", None), ("--rate", "rate", None),
                 ("--pace", "pace", None), ("--journal", "journal", None),
                 ("--campaign-id", "campaign_id", None), ("--resend-unknown", "resend_unknown", False),
                 ("--no-dedupe", "no_dedupe", False),
                 ("--no-enforce-tier", "no_enforce_tier", False),
                 ("--stop-on-error", "stop_on_error", False),
                 ("--unreachable-after", "unreachable_after", None),
                 ("--unreachable-for", "unreachable_for", None),
                 ("--dry-run", "dry_run", False), ("--no-progress", "no_progress", False))


def _send(args: argparse.Namespace) -> int:
    if args.file is not None:
        return _send_file(args)
    given = [option for option, dest, unset in _BULK_OPTIONS if getattr(args, dest) != unset]
    if given:
        raise CommandError(EXIT_USAGE, f"{given[0]} applies to --file (many messages)")
    missing = [option for option, dest in _MESSAGE_OPTIONS if getattr(args, dest) is None]
    if missing:
        hint = " (or --file FILE for many messages)" if args.to is None else ""
        raise CommandError(EXIT_USAGE, "send needs " + ", ".join(missing) + hint)
    output = output_of(args, SEND_RESULT)
    template = Template(name=args.template, parameters=_parameters(args), language=args.language)
    # Chosen here rather than by the client so that an interrupted send can name it too.
    key = args.idempotency_key or str(uuid.uuid4())
    with connect(args) as client:
        try:
            result = client.messages.send(to=args.to, from_=args.from_, template=template,
                                          idempotency_key=key)
        except KeyboardInterrupt as interrupt:
            raise CommandError(EXIT_INTERRUPTED, "interrupted: the message may have been "
                                                 "sent; " + reconcile_hint(key)) from interrupt
    write_result(result, output, sys.stdout)
    return EXIT_OK


#: Options of a single send that --file refuses, and why.
_NOT_WITH_FILE = (
    ("--to", "to", "the recipients are the file's"),
    ("--idempotency-key", "idempotency_key", "each row may give its idempotency_key"),
    ("--output", "output", "--results FILE writes one row per message"),
    ("--columns", "columns", "--results FILE writes one row per message"),
)


def _send_file(args: argparse.Namespace) -> int:
    for option, dest, why in _NOT_WITH_FILE:
        if getattr(args, dest) is not None:
            raise CommandError(EXIT_USAGE, f"--file and {option} cannot be used together: "
                                           f"{why}")
    if args.concurrency is None:
        args.concurrency = DEFAULT_CONCURRENCY
    from .message_file import Defaults
    from .send_file import send_file

    defaults = Defaults(from_=args.from_, template=args.template, language=args.language,
                        parameters=args.parameters if args.parameters is not None
                        else args.param)
    with connect(args) as client:
        return send_file(args, client, defaults)


def _parameters(args: argparse.Namespace) -> TemplateParameters:
    parameters: TemplateParameters = (
        args.parameters if args.parameters is not None else args.param or []
    )
    return parameters
