#!/usr/bin/env python3
"""Observes a CoAP resource with the aiocoap library for a while, printing each notification's payload on
its own line (the registration's response first), then cancels the observation and exits 0.

aiocoap-client --observe cannot do this in aiocoap 0.4.17: it shows the first response only
(https://github.com/chrysn/aiocoap/issues/395), so corral's interop tests use this script instead.

Usage: aiocoap_observe.py URI SECONDS [PROXY-URI|-] [CREDENTIALS]
(with PROXY-URI the observation goes through that forward proxy, as aiocoap-client --proxy does; with a
credentials file, OSCORE-protected as aiocoap-client --credentials does)
"""
import asyncio
import sys

import aiocoap
import aiocoap.error
import aiocoap.proxy.client


async def main(uri, seconds, proxy=None, credentials=None):
    context = await aiocoap.Context.create_client_context()
    if credentials:
        import json

        with open(credentials) as f:
            context.client_credentials.load_from_dict(json.load(f))
    interface = context if proxy is None else aiocoap.proxy.client.ProxyForwarder(proxy, context)
    # A representation larger than a block that changes while aiocoap fetches its later blocks shows a new
    # ETag, and aiocoap 0.4.17 fails the registration with ResourceChanged instead of starting over, as
    # RFC 7959 §2.4 has a client do; so this script starts over (at most three times).
    for attempt in range(3):
        request = aiocoap.Message(code=aiocoap.GET, uri=uri, observe=0)
        requester = interface.request(request)
        try:
            first = await asyncio.wait_for(requester.response, timeout=10)
            break
        except aiocoap.error.ResourceChanged:
            print(f"the resource changed during the first response's blocks (attempt {attempt + 1})", file=sys.stderr)
    else:
        return 1
    print(first.payload.decode(errors="replace"), flush=True)
    if not first.code.is_successful():
        return 1

    async def notifications():
        async for n in requester.observation:
            print(n.payload.decode(errors="replace"), flush=True)

    try:
        await asyncio.wait_for(notifications(), timeout=seconds)
    except asyncio.TimeoutError:
        pass
    requester.observation.cancel()
    await context.shutdown()
    return 0


if __name__ == "__main__":
    proxy = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] != "-" else None
    credentials = sys.argv[4] if len(sys.argv) > 4 else None
    sys.exit(asyncio.run(main(sys.argv[1], float(sys.argv[2]), proxy, credentials)))
