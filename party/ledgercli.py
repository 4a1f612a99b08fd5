"""`fedanon party ledger show | verify | unlock`: the privacy officer's commands.

``show`` lists every row (``--since DATE``; ``--json`` / ``--csv`` for tools, with each
row's ``release_key``), what each table has spent and the chain's head hash; ``verify``
recomputes the hash chain (exit 0 intact, exit 3 naming the first edited, deleted or
reordered row; the head hash printed, to compare with a copy kept elsewhere);
``unlock IDENTITY`` lifts a lockout (an identity
or an address), also while the daemon runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EXIT_BROKEN = 3


def register(psub: Any) -> None:
    p = psub.add_parser("ledger", help="the privacy ledger: show, verify, unlock")
    lsub = p.add_subparsers(dest="ledger_command", required=True)
    show = lsub.add_parser("show", help="every Prepare, refusal, outcome and lockout")
    show.add_argument("--config", type=Path, required=True, help="party.toml")
    show.add_argument("--since", help="only rows from this date (YYYY-MM-DD, UTC) on")
    fmt = show.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="a JSON array of rows")
    fmt.add_argument("--csv", action="store_true", help="CSV with a header")
    show.set_defaults(handler=show_cmd)
    verify = lsub.add_parser("verify", help="check the hash chain (exit 3: not intact)")
    verify.add_argument("--config", type=Path, required=True, help="party.toml")
    verify.set_defaults(handler=verify_cmd)
    unlock = lsub.add_parser("unlock", help="lift the lockout of an identity or address")
    unlock.add_argument("identity", help="a certificate name or an address (10.0.0.5)")
    unlock.add_argument("--config", type=Path, required=True, help="party.toml")
    unlock.set_defaults(handler=unlock_cmd)


def _store(config: Path) -> Any:
    from fedanon.ledger.daemon import default_path
    from fedanon.ledger.store import Store
    from fedanon.party.config import load_party_config

    cfg = load_party_config(config)
    return Store(cfg.ledger or default_path(config), create=False)


def show_cmd(args: argparse.Namespace) -> int:
    from fedanon.ledger.show import parse_since, rows, write_csv, write_json, write_text

    since = None if args.since is None else parse_since(args.since)
    store = _store(args.config)
    try:
        it = rows(store, since)
        if args.json:
            write_json(sys.stdout, it)
        elif args.csv:
            write_csv(sys.stdout, it)
        else:
            write_text(sys.stdout, it, store)
    finally:
        store.close()
    return 0


def verify_cmd(args: argparse.Namespace) -> int:
    from fedanon.ledger.show import check_chain, head_line

    store = _store(args.config)
    try:
        store.quick_check()
        n, broken = check_chain(store)
        head = head_line(store)
    finally:
        store.close()
    if broken is not None:
        print(f"ledger {store.path} is NOT intact: {broken} ({n} rows before it are intact)")
        return EXIT_BROKEN
    print(
        f"ledger {store.path} is intact: {n} rows; {head} (compare it with a copy kept "
        "elsewhere: the chain has no key)"
    )
    return 0


def unlock_cmd(args: argparse.Namespace) -> int:
    from fedanon.ledger.access import unlock

    store = _store(args.config)
    try:
        lifted = unlock(store, args.identity)
    finally:
        store.close()
    print(f"{args.identity}: " + ("unlocked" if lifted else "not locked out"))
    return 0
