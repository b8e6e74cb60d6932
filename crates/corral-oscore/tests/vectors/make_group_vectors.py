#!/usr/bin/env python3
"""Writes group_vectors.json: Group OSCORE and deterministic-request messages protected by aiocoap
(an independent implementation) with fixed keys, for corral-oscore's byte-for-byte tests.

Run with aiocoap 0.4.17 (`pip install aiocoap[oscore]`): python3 make_group_vectors.py > group_vectors.json
Ed25519 signatures are deterministic, so every protected message below is reproducible."""
import json, sys
from aiocoap import oscore, Message
from aiocoap.message import Direction
from aiocoap.numbers.codes import Code
from cryptography.hazmat.primitives import hashes

SECRET = bytes(range(1, 17))
SALT = bytes.fromhex("9e7ca92223786340")
GID = bytes.fromhex("dd11")
CLIENT, SERVER, DET = b"\x25", b"\x52", b"\xdc"
CLIENT_KEY = bytes(range(0x01, 0x21))
SERVER_KEY = bytes(range(0x21, 0x41))
sig = oscore.Ed25519()


def cred(priv):
    pub = sig.public_from_private(priv)
    return bytes.fromhex("a108a101a4010103272006215820") + pub


def context(own_id, own_key, peers):
    return oscore.SimpleGroupContext(
        oscore.AES_CCM_16_64_128(), hashes.SHA256(), sig, oscore.AES_CCM_16_64_128(), oscore.EcdhSsHkdf256(),
        GID, SECRET, SALT, own_id, own_key, cred(own_key), peers, None)


def out(m):
    return {"code": int(m.code), "options": m.opt.encode().hex(), "payload": m.payload.hex()}


def outgoing(**kw):
    m = Message(**kw)
    m.direction = Direction.OUTGOING
    return m


def incoming(m):
    m2 = Message(code=m.code, payload=m.payload)
    m2.opt = m.opt
    m2.direction = Direction.INCOMING
    return m2


client = context(CLIENT, CLIENT_KEY, {SERVER: cred(SERVER_KEY), DET: oscore.DETERMINISTIC_KEY})
server = context(SERVER, SERVER_KEY, {CLIENT: cred(CLIENT_KEY), DET: oscore.DETERMINISTIC_KEY})
vectors = {
    "secret": SECRET.hex(), "salt": SALT.hex(), "group_id": GID.hex(), "client_id": CLIENT.hex(),
    "server_id": SERVER.hex(), "deterministic_id": DET.hex(), "client_key": CLIENT_KEY.hex(),
    "server_key": SERVER_KEY.hex(), "client_cred": cred(CLIENT_KEY).hex(), "server_cred": cred(SERVER_KEY).hex(),
    "common_iv": client.common_iv.hex(), "client_sender_key": client._sender_key.hex(),
    "sekey": client.signature_encryption_key.hex(),
}

# A deterministic GET /instruction?t=7 and the server's signed answer (its sequence number 5).
det = client.for_sending_deterministic_requests(DET, SERVER)
req = outgoing(code=Code.GET, uri_path=["instruction"], uri_query=["t=7"])
p_req, rid = det.protect(req)
vectors["det_request"] = out(p_req)
unprotected = oscore.verify_start(incoming(p_req))
sctx = server.get_oscore_context_for(unprotected)
plain, srid = sctx.unprotect(incoming(p_req))
assert plain.opt.uri_path == ("instruction",)
server.sender_sequence_number = 5
resp = outgoing(code=Code.CONTENT, payload=b"turn left", content_format=0, max_age=30)
p_resp, _ = sctx.context_for_response().protect(resp, srid)
vectors["det_response"] = out(p_resp)
vectors["det_response_plain"] = {"code": int(Code.CONTENT), "payload": b"turn left".hex()}

# A group-mode GET /hello (client sequence number 3) and the server's pairwise answer (request nonce).
client.sender_sequence_number = 3
req = outgoing(code=Code.GET, uri_path=["hello"])
p_req, rid = client.protect(req)
vectors["group_request"] = out(p_req)
unprotected = oscore.verify_start(incoming(p_req))
sctx = server.get_oscore_context_for(unprotected)
plain, srid = sctx.unprotect(incoming(p_req))
resp = outgoing(code=Code.CONTENT, payload=b"hello group")
p_resp, _ = sctx.context_for_response().protect(resp, srid)
vectors["group_pairwise_response"] = out(p_resp)

# A pairwise-mode PUT to the server (client sequence number 4).
client.sender_sequence_number = 4
req = outgoing(code=Code.PUT, uri_path=["light"], payload=b"on")
p_req, rid = client.pairwise_for(SERVER).protect(req)
vectors["pairwise_request"] = out(p_req)
unprotected = oscore.verify_start(incoming(p_req))
sctx = server.get_oscore_context_for(unprotected)
plain, srid = sctx.unprotect(incoming(p_req))
assert plain.payload == b"on"
json.dump(vectors, sys.stdout, indent=1)
print()
