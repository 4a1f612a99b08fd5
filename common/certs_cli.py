"""`fedanon certs init` and `fedanon certs issue`: the federation's private PKI."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from common import certs


def register(sub: Any) -> None:
    p = sub.add_parser("certs", help="federation CA and certificates")
    csub = p.add_subparsers(dest="certs_command", required=True)
    i = csub.add_parser("init", help="create the federation CA (ca.pem, ca.key)")
    i.add_argument("--dir", type=Path, required=True, help="CA directory")
    i.add_argument("--overwrite", action="store_true", help="replace an existing CA")
    i.set_defaults(handler=_init)
    s = csub.add_parser("issue", help="issue a party or leader certificate")
    s.add_argument("name", help="party / leader name (becomes the DNS SAN)")
    s.add_argument("--role", choices=certs.ROLES, required=True)
    s.add_argument("--dir", type=Path, required=True, help="CA directory")
    s.add_argument("--out", type=Path, help="where NAME.pem / NAME.key go (default: --dir)")
    s.add_argument("--days", type=int, default=365, help="validity, at most 365")
    s.add_argument("--overwrite", action="store_true", help="replace existing files")
    s.set_defaults(handler=_issue)


def _init(args: argparse.Namespace) -> int:
    paths = certs.init_ca(args.dir, overwrite=args.overwrite)
    print(f"CA certificate {paths.cert}, key {paths.key} (keep it offline)")
    return 0


def _issue(args: argparse.Namespace) -> int:
    paths = certs.issue(
        args.dir, args.name, args.role, out_dir=args.out, days=args.days, overwrite=args.overwrite
    )
    print(f"{args.role} certificate {paths.cert}, key {paths.key}")
    return 0
