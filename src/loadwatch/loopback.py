"""Opening loadwatch's own local servers: a loopback URL never goes through an HTTP proxy.

urllib sends every URL through $http_proxy unless $no_proxy lists the host, and machines that set
the one often forget the other: then `loadwatch up` would wait on Prometheus through a proxy that
cannot reach it. Other hosts keep the environment's proxy settings.
"""

from __future__ import annotations

import ipaddress
import urllib.request
from http.client import HTTPResponse
from urllib.parse import urlsplit

_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def urlopen(url: str | urllib.request.Request, timeout: float) -> HTTPResponse:
    if is_loopback(url.full_url if isinstance(url, urllib.request.Request) else url):
        return _DIRECT.open(url, timeout=timeout)
    return urllib.request.urlopen(url, timeout=timeout)
