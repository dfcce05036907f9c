"""A CRD's conversion strategy and its webhook, as kube-apiserver checks them on create.

Ports ``validateCustomResourceConversion`` and ``validateConversionReviewVersions``
(apiextensions-apiserver v0.36.3 ``pkg/apis/apiextensions/validation/validation.go``) with
apiserver v0.36.3 ``pkg/util/webhook``; a create allows an invalid CA bundle, as upstream.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from disagg_tools.emulator.apiserver import fielderrors as fe
from disagg_tools.emulator.apiserver import gofmt, names
from disagg_tools.emulator.apiserver.fielderrors import FieldError

_REVIEW_VERSIONS = ["v1", "v1beta1"]


def validate_conversion(
    conversion: Mapping[str, Any] | None, require_known_review_version: bool, path: str
) -> list[FieldError]:
    """``validateCustomResourceConversion``."""
    if conversion is None:
        return []
    errs: list[FieldError] = []
    strategy = str(conversion.get("strategy") or "")
    if not strategy:
        errs.append(fe.required(fe.child(path, "strategy"), ""))
    elif strategy not in ("None", "Webhook"):
        errs.append(fe.not_supported(fe.child(path, "strategy"), strategy, ["None", "Webhook"]))
    reviews = conversion.get("conversionReviewVersions")
    if strategy != "Webhook":
        unused = "should not be set when strategy is not set to Webhook"
        set_fields = [
            ("webhookClientConfig", conversion.get("webhookClientConfig") is not None),
            ("conversionReviewVersions", bool(reviews)),
        ]
        return errs + [
            fe.forbidden(fe.child(path, name), unused) for name, is_set in set_fields if is_set
        ]
    errs += _client(conversion.get("webhookClientConfig"), fe.child(path, "webhookClientConfig"))
    at = fe.child(path, "conversionReviewVersions")
    return errs + _review_versions(list(reviews or []), require_known_review_version, at)


def _client(client: Mapping[str, Any] | None, path: str) -> list[FieldError]:
    if client is None:
        return [fe.required(path, "required when strategy is set to Webhook")]
    if (client.get("url") is None) == (client.get("service") is None):
        return [fe.required(path, "exactly one of url or service is required")]
    if client.get("url") is not None:
        return webhook_url(fe.child(path, "url"), str(client["url"]))
    return webhook_service(fe.child(path, "service"), client["service"])


def _review_versions(versions: list[str], require_known: bool, path: str) -> list[FieldError]:
    if not versions:
        return [fe.required(path, "")]
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, v in enumerate(versions):
        if v in seen:
            errs.append(fe.invalid(fe.index(path, i), v, "duplicate version"))
            continue
        seen.add(v)
        errs += [fe.invalid(fe.index(path, i), v, m) for m in names.is_dns1035_label(v)]
    if require_known and not any(v in _REVIEW_VERSIONS for v in versions):
        errs.append(
            fe.invalid(
                path, list(versions), "must include at least one of " + ", ".join(_REVIEW_VERSIONS)
            )
        )
    return errs


_URL = re.compile(
    r"^(?:([A-Za-z][A-Za-z0-9+.-]*):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$"
)


def webhook_url(path: str, url: str) -> list[FieldError]:
    """``webhook.ValidateWebhookURL`` (https forced; the URL split as Go's ``url.Parse``)."""
    form = "; desired format: https://host[/path]"
    match = _URL.match(url)
    if match is None:
        return [
            fe.required(
                path, f"url must be a valid URL: parse {gofmt.quote(url)}: invalid URL{form}"
            )
        ]
    scheme, authority, _, query, fragment = match.groups()
    errs: list[FieldError] = []
    if (scheme or "") != "https":
        errs.append(fe.invalid(path, scheme or "", "'https' is the only allowed URL scheme" + form))
    user, _, host = (authority or "").rpartition("@")
    if not host:
        errs.append(fe.invalid(path, host, "host must be specified" + form))
    if authority and "@" in authority:
        errs.append(fe.invalid(path, user, "user information is not permitted in the URL"))
    if fragment:
        errs.append(fe.invalid(path, fragment, "fragments are not permitted in the URL"))
    if query:
        errs.append(fe.invalid(path, query, "query parameters are not permitted in the URL"))
    return errs


def webhook_service(path: str, service: Mapping[str, Any]) -> list[FieldError]:
    """``webhook.ValidateWebhookService``."""
    errs: list[FieldError] = []
    if not service.get("name"):
        errs.append(fe.required(fe.child(path, "name"), ""))
    if not service.get("namespace"):
        errs.append(fe.required(fe.child(path, "namespace"), ""))
    port = int(service.get("port") or 0)
    if not 1 <= port <= 65535:
        errs.append(
            fe.invalid(
                fe.child(path, "port"),
                port,
                "port is not valid: must be between 1 and 65535, inclusive",
            )
        )
    url_path = service.get("path")
    if url_path is None or url_path in ("/", ""):
        return errs
    at = fe.child(path, "path")
    if url_path == "//":
        return [*errs, fe.invalid(at, url_path, "segment[0] may not be empty")]
    if not url_path.startswith("/"):
        errs.append(fe.invalid(at, url_path, "must start with a '/'"))
    check = url_path[1:]
    check = check[:-1] if check.endswith("/") else check
    for i, step in enumerate(check.split("/")):
        if not step:
            errs.append(fe.invalid(at, url_path, f"segment[{i}] may not be empty"))
            continue
        errs += [
            fe.invalid(at, url_path, f"segment[{i}]: {m}") for m in names.is_dns1123_subdomain(step)
        ]
    return errs
