#!/usr/bin/env python3
"""A tiny aiocoap server for corral's interop tests.

Resources: /hello (GET), /store (GET, PUT, POST, DELETE), /slow (GET, answered after 1.5 s, so aiocoap
sends an empty ACK first and a separate response), /obs (observable: a counter that changes every
--obs-period seconds), /large (GET: 5000 bytes, block-wise), /large-update (PUT stores a body of any
size, block-wise; GET returns it) and /.well-known/core. Binds [::] (IPv4 and IPv6) on the given port
(0 = any) and prints "port N" once it is serving. With --credentials FILE it also serves OSCORE. Stops by itself after --lifetime seconds.
"""
import argparse
import asyncio

import aiocoap
import aiocoap.resource as resource


class Hello(resource.Resource):
    async def render_get(self, request):
        return aiocoap.Message(payload=b"hello from aiocoap", content_format=0)


class Store(resource.Resource):
    def __init__(self):
        super().__init__()
        self.value = b"initial"

    async def render_get(self, request):
        return aiocoap.Message(payload=self.value, content_format=0)

    async def render_put(self, request):
        self.value = request.payload
        return aiocoap.Message(code=aiocoap.CHANGED)

    async def render_post(self, request):
        self.value = self.value + request.payload
        return aiocoap.Message(code=aiocoap.CREATED, location_path=("store",))

    async def render_delete(self, request):
        self.value = b""
        return aiocoap.Message(code=aiocoap.DELETED)


class Obs(resource.ObservableResource):
    def __init__(self, period):
        super().__init__()
        self.count = 0
        self.period = period
        self.handle = asyncio.get_event_loop().call_later(period, self.tick)

    def tick(self):
        self.count += 1
        self.updated_state()
        self.handle = asyncio.get_event_loop().call_later(self.period, self.tick)

    async def render_get(self, request):
        return aiocoap.Message(payload=str(self.count).encode(), content_format=0)


def large_body():
    return bytes((i * 7 + i // 251) % 256 for i in range(5000))


class Large(resource.Resource):
    async def render_get(self, request):
        return aiocoap.Message(payload=large_body(), content_format=42)


class LargeUpdate(resource.Resource):
    def __init__(self):
        super().__init__()
        self.value = b""

    async def render_get(self, request):
        return aiocoap.Message(payload=self.value, content_format=42)

    async def render_put(self, request):
        self.value = request.payload
        return aiocoap.Message(code=aiocoap.CHANGED)


class Slow(resource.Resource):
    async def render_get(self, request):
        await asyncio.sleep(1.5)
        return aiocoap.Message(payload=b"slow but sure", content_format=0)


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--lifetime", type=float, default=120.0)
    parser.add_argument("--obs-period", type=float, default=0.5)
    parser.add_argument("--credentials", help="serve OSCORE with the contexts of this credentials file")
    args = parser.parse_args()
    root = resource.Site()
    root.add_resource([".well-known", "core"], resource.WKCResource(root.get_resources_as_linkheader))
    root.add_resource(["hello"], Hello())
    root.add_resource(["store"], Store())
    root.add_resource(["slow"], Slow())
    root.add_resource(["obs"], Obs(args.obs_period))
    root.add_resource(["large"], Large())
    root.add_resource(["large-update"], LargeUpdate())
    port = args.port
    if port == 0:
        import socket

        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        s.bind(("::", 0))
        port = s.getsockname()[1]
        s.close()
    site, server_credentials = root, None
    if args.credentials:
        import json

        from aiocoap.credentials import CredentialsMap
        from aiocoap.oscore_sitewrapper import OscoreSiteWrapper

        server_credentials = CredentialsMap()
        with open(args.credentials) as f:
            server_credentials.load_from_dict(json.load(f))
        site = OscoreSiteWrapper(root, server_credentials)
    await aiocoap.Context.create_server_context(site, bind=("::", port), server_credentials=server_credentials)
    print(f"port {port}", flush=True)
    await asyncio.sleep(args.lifetime)


if __name__ == "__main__":
    asyncio.run(main())
