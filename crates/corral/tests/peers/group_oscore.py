#!/usr/bin/env python3
"""aiocoap's side of the Group OSCORE interop test, with a member's keys from a `corral oscore group` folder.

  group_oscore.py client GROUPDIR MEMBER URI    one deterministic GET; prints "CODE PAYLOAD"
  group_oscore.py group-client GROUPDIR MEMBER URI
                                                one GET in group mode (signed); prints "CODE PAYLOAD"
  group_oscore.py server GROUPDIR MEMBER HOST:PORT
                                                serves /instruction?t=X ("instruction t=X from aiocoap")
                                                in the group; prints "listening on HOST:PORT"; stops after 60 s

aiocoap reads no group contexts from files, so this builds its SimpleGroupContext from corral's
settings.json / secret.json (the same Master Secret, Group ID, Sender IDs and Ed25519 keys)."""
import asyncio
import json
import os
import sys

import aiocoap
from aiocoap import oscore, resource
from aiocoap.credentials import CredentialsMap
from aiocoap.oscore_sitewrapper import OscoreSiteWrapper
from cryptography.hazmat.primitives import hashes


def load(groupdir, member):
    d = os.path.join(groupdir, member)
    settings = json.load(open(os.path.join(d, "settings.json")))
    secret = json.load(open(os.path.join(d, "secret.json")))
    det = bytes.fromhex(settings["deterministic-id_hex"])
    peers = {bytes.fromhex(k): bytes.fromhex(v) for k, v in settings["members"].items()}
    peers[det] = oscore.DETERMINISTIC_KEY
    key = bytes.fromhex(secret["private-key_hex"])
    own = bytes.fromhex("a108a101a4010103272006215820") + oscore.Ed25519().public_from_private(key)
    ctx = oscore.SimpleGroupContext(
        oscore.AES_CCM_16_64_128(), hashes.SHA256(), oscore.Ed25519(), oscore.AES_CCM_16_64_128(),
        oscore.EcdhSsHkdf256(), bytes.fromhex(settings["group-id_hex"]), bytes.fromhex(secret["secret_hex"]),
        bytes.fromhex(settings.get("salt_hex", "")), bytes.fromhex(settings["sender-id_hex"]), key, own, peers, None)
    return ctx, det


class Instruction(resource.Resource):
    async def render_get(self, request):
        t = next((q[2:] for q in request.opt.uri_query if q.startswith("t=")), "?")
        return aiocoap.Message(code=aiocoap.CONTENT, payload=f"instruction t={t} from aiocoap".encode(), max_age=30)


async def client(groupdir, member, uri, deterministic=True):
    ctx, det = load(groupdir, member)
    c = await aiocoap.Context.create_client_context()
    # Deterministic requests to the server, member 00 (corral oscore group's numbering); a plain
    # SimpleGroupContext sends in group mode.
    c.client_credentials["*"] = ctx.for_sending_deterministic_requests(det, b"\x00") if deterministic else ctx
    r = await c.request(aiocoap.Message(code=aiocoap.GET, uri=uri)).response
    print(r.code, r.payload.decode(errors="replace"), flush=True)
    await c.shutdown()
    return 0 if r.code.is_successful() else 1


async def server(groupdir, member, bind):
    ctx, _ = load(groupdir, member)
    host, port = bind.rsplit(":", 1)
    root = resource.Site()
    root.add_resource(["instruction"], Instruction())
    creds = CredentialsMap()
    creds[":group"] = ctx
    await aiocoap.Context.create_server_context(OscoreSiteWrapper(root, creds), bind=(host, int(port)), server_credentials=creds)
    print(f"listening on {bind}", flush=True)
    await asyncio.sleep(60)
    return 0


if __name__ == "__main__":
    mode, groupdir, member, where = sys.argv[1:5]
    if mode == "server":
        sys.exit(asyncio.run(server(groupdir, member, where)))
    sys.exit(asyncio.run(client(groupdir, member, where, deterministic=(mode == "client"))))
