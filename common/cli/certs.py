"""`fedanon certs`: the federation's private PKI.

``init`` and ``issue`` run at the coordinator (``issue`` makes the key there too);
``request`` runs at a hospital (its key never leaves it) and ``sign`` at the coordinator.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from fedanon.security import certs, csr


def register(sub: Any) -> None:
    p = sub.add_parser("certs", help="federation CA and certificates")
    csub = p.add_subparsers(dest="certs_command", required=True)
    i = csub.add_parser("init", help="create the federation CA (ca.pem, ca.key)")
    i.add_argument("--dir", type=Path, required=True, help="CA directory")
    i.add_argument("--overwrite", action="store_true", help="replace an existing CA")
    i.set_defaults(handler=_init)
    s = csub.add_parser("issue", help="issue a party or leader certificate and its key")
    s.add_argument("name", help="party / leader name (becomes the DNS SAN)")
    s.add_argument("--role", choices=certs.ROLES, required=True)
    s.add_argument("--dir", type=Path, required=True, help="CA directory")
    s.add_argument("--out", type=Path, help="where NAME.pem / NAME.key go (default: --dir)")
    s.add_argument("--days", type=int, default=365, help="validity in days, at most 365 (default)")
    s.add_argument("--overwrite", action="store_true", help="replace existing files")
    s.set_defaults(handler=_issue)
    r = csub.add_parser(
        "request",
        help="at a hospital: make a private key and a certificate request for the coordinator",
    )
    r.add_argument("name", help="this party's / the leader's name (becomes the DNS SAN)")
    r.add_argument("--role", choices=certs.ROLES, default="party", help="default: party")
    r.add_argument(
        "--out", type=Path, required=True, help="directory for NAME.key (0600) and NAME.csr"
    )
    r.add_argument("--overwrite", action="store_true", help="replace existing files")
    r.set_defaults(handler=_request)
    g = csub.add_parser("sign", help="at the coordinator: sign a hospital's certificate request")
    g.add_argument("--csr", type=Path, required=True, help="the request (NAME.csr)")
    g.add_argument("--role", choices=certs.ROLES, required=True, help="the role the CA grants")
    g.add_argument(
        "--ca-dir", "--dir", dest="ca_dir", type=Path, required=True, help="CA directory"
    )
    g.add_argument("--out", type=Path, required=True, help="the certificate to write (NAME.pem)")
    g.add_argument("--days", type=int, default=365, help="validity in days, at most 365 (default)")
    g.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    g.set_defaults(handler=_sign)


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


def _request(args: argparse.Namespace) -> int:
    paths = csr.request(args.name, args.role, args.out, overwrite=args.overwrite)
    print(f"private key {paths.key} (mode 0600: keep it here, never send it)")
    print(f"certificate request {paths.csr}: send it to the federation's coordinator")
    print(f"public key fingerprint {paths.fingerprint}")
    print("  (tell the coordinator this fingerprint over another channel, e.g. by phone)")
    return 0


def _sign(args: argparse.Namespace) -> int:
    signed = csr.sign_request(
        args.csr, args.role, args.ca_dir, args.out, days=args.days, overwrite=args.overwrite
    )
    print(f"{signed.identity.role} certificate for {signed.identity.name}: {signed.cert}")
    print(f"valid until {signed.not_after}")
    print(f"public key fingerprint {signed.fingerprint}")
    print("  (check it with the requester before sending them the certificate and ca.pem)")
    return 0
