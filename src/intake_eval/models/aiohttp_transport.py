"""An httpx transport over aiohttp for the openai client.

httpcore's async connection pool scans every connection for every queued request, so at 64
requests in flight its CPU cost per call grows with concurrency (~20–35 ms per call measured
here, see scripts/bench_models.py); aiohttp's pool does not. The openai client keeps its request
building, error mapping and parsing; only the socket work moves. aiohttp errors are re-raised as
the httpx errors the openai client already maps to APITimeoutError / APIConnectionError.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import httpx


class AiohttpTransport(httpx.AsyncBaseTransport):
    def __init__(self, max_connections: int = 0):
        self._max_connections = max_connections  # 0 = unlimited; the endpoint limiter caps in-flight
        self._session: aiohttp.ClientSession | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._max_connections, ttl_dns_cache=300)
            # Decompression stays with httpx, which reads the Content-Encoding header itself.
            self._session = aiohttp.ClientSession(connector=connector, auto_decompress=False, trust_env=True)
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts: dict[str, Any] = request.extensions.get("timeout") or {}
        timeout = aiohttp.ClientTimeout(total=timeouts.get("read"), sock_connect=timeouts.get("connect"))
        body = await request.aread()
        try:
            async with self._get_session().request(
                request.method, str(request.url), headers=list(request.headers.multi_items()), data=body or None,
                timeout=timeout, allow_redirects=False,
            ) as response:
                content = await response.read()
                headers = [(key, value) for key, value in response.headers.items()]
                status = response.status
        except asyncio.TimeoutError as error:
            raise httpx.ReadTimeout(f"no answer within {timeouts.get('read')} s", request=request) from error
        except aiohttp.ClientConnectorError as error:
            raise httpx.ConnectError(str(error), request=request) from error
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError) as error:
            raise httpx.RemoteProtocolError(str(error) or type(error).__name__, request=request) from error
        except aiohttp.ClientError as error:
            raise httpx.ReadError(str(error) or type(error).__name__, request=request) from error
        return httpx.Response(status_code=status, headers=headers, content=content, request=request)

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None
