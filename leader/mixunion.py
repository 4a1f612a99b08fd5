"""The mix-net union (Sec. 5.4, `union = "mixnet"`): per-run keys, onion-wrapped batches, the mix
through the ring."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial

from cryptography.hazmat.primitives.asymmetric import ec

from fedanon.errors import ProtocolError
from fedanon.io.release import output_columns
from fedanon.leader.links import Link, Traffic
from fedanon.model.spec import RunSpec
from fedanon.model.tree import AttrTree
from fedanon.net import rpc
from fedanon.net.convert import key_from_pb, key_to_pb, mix_request, unpack_data
from fedanon.pb.fedanon.v1 import party_pb2 as pb
from fedanon.pb.fedanon.v1 import party_pb2_grpc as pb_grpc
from fedanon.security import mixnet

log = logging.getLogger(__name__)


def pad_size(spec: RunSpec, trees: Sequence[AttrTree], max_field_bytes: int) -> int:
    """Fixed record size: QID fields as long as the longest label of the final trees, every
    other released field ``max_field_bytes``."""
    widths = {t.name: max(len(label.encode("utf-8")) for label in t.labels) for t in trees}
    cols = output_columns(spec)
    return 4 + sum(4 + widths.get(c, max_field_bytes) for c in cols)


def fetch_keys(
    run_id: bytes,
    links: Sequence[Link],
    ca_pem: bytes,
    traffic: Traffic,
    pool: ThreadPoolExecutor,
    deadline: rpc.Deadline,
) -> list[Future[pb.SignedKey]]:
    """Ask every party for its per-run mix public key, in parallel (a key is drawn at
    random for the run and reveals nothing, so the leader asks right after Prepare and the
    union does not wait a round trip for it); each answer is verified against the CA."""

    def get_key(link: Link) -> pb.SignedKey:
        req = pb.UnionKeyRequest(run_id=run_id)
        reply: pb.SignedKey = link.call(
            "union (keys)", lambda s: s.UnionKey(req, timeout=rpc.timeout_of(deadline))
        )
        traffic.add("union", sent=req.ByteSize(), received=reply.ByteSize())
        mixnet.verify_signed_key(key_from_pb(reply), ca_pem, link.name, run_id)
        return reply

    return [pool.submit(get_key, link) for link in links]


def secure_union(
    run_id: bytes,
    links: Sequence[Link],
    leader_name: str,
    tls_key: ec.EllipticCurvePrivateKey,
    cert_pem: bytes,
    ca_pem: bytes,
    pad: int,
    traffic: Traffic,
    pool: ThreadPoolExecutor,
    deadline: rpc.Deadline,
    party_keys: Sequence[Future[pb.SignedKey]] | None = None,
) -> list[tuple[str, ...]]:
    """All released records of all parties, shuffled, unlinkable to their party.
    ``party_keys``: from :func:`fetch_keys` earlier (asked while the rounds ran), else now."""
    step = "union"
    my_key, my_pub = mixnet.generate_keypair()
    mine = mixnet.sign_public_key(leader_name, my_pub, run_id, tls_key, cert_pem)
    asked = party_keys or fetch_keys(run_id, links, ca_pem, traffic, pool, deadline)
    keys = traffic.timed("network", lambda: [f.result() for f in asked])
    keys.append(key_to_pb(mine))
    batch_req = pb.UnionBatchRequest(run_id=run_id, keys=keys, pad_size=pad)

    n_hops = len(links)
    size0 = mixnet.ciphertext_size(pad, n_hops + 1)

    def get_batch(link: Link) -> list[bytes]:
        def rpc_call(s: pb_grpc.PartyStub) -> list[bytes]:
            stream = s.UnionBatch(batch_req, timeout=rpc.timeout_of(deadline, rpc.STREAM_TIMEOUT_S))
            datas = (b.data for b in traffic.counting(step, stream, sent=False))
            return unpack_data(datas, size0)

        traffic.add(step, sent=batch_req.ByteSize())
        return link.call("union (batches)", rpc_call)

    batches = traffic.timed("network", lambda: list(pool.map(get_batch, links)))
    blobs = [b for batch in batches for b in batch]
    secrets.SystemRandom().shuffle(blobs)
    total = len(blobs)
    log.info("union: %d records from %d parties", total, len(links))
    for hop, link in enumerate(links):
        blobs = traffic.timed(
            "network", partial(_mix_hop, link, hop, blobs, pad, n_hops, run_id, traffic, deadline)
        )
    plain = traffic.timed(
        "crypto",
        lambda: mixnet.strip_and_shuffle(blobs, my_key, run_id, len(links), total),
    )
    try:
        return [mixnet.decode_record(p) for p in plain]
    except ProtocolError as exc:
        raise ProtocolError(f"union: a decrypted record is malformed: {exc}") from None


def _mix_hop(
    link: Link,
    hop: int,
    blobs: list[bytes],
    pad: int,
    n_hops: int,
    run_id: bytes,
    traffic: Traffic,
    deadline: rpc.Deadline,
) -> list[bytes]:
    total = len(blobs)

    def mix(s: pb_grpc.PartyStub) -> list[bytes]:
        size_in = mixnet.ciphertext_size(pad, n_hops + 1 - hop)
        chunks = mix_request(blobs, size_in, run_id, hop)
        stream = s.Mix(
            traffic.counting("union", chunks, sent=True),
            timeout=rpc.timeout_of(deadline, rpc.STREAM_TIMEOUT_S),
        )
        datas = (b.data for b in traffic.counting("union", stream, sent=False))
        return unpack_data(datas, mixnet.ciphertext_size(pad, n_hops - hop), total)

    return link.call(f"union (mix hop {hop})", mix)
