"""Router adapters: how the intended degrade state reaches a router, always whole and declarative.

One module per router, each with its adapter and the settings class of its `degrade.adapters`
entry; `base` holds the protocol, `http` the HTTP and retry code they share, `files` the file
replacement and commands the file-based ones share, `registry` the list of kinds. A new kind
joins with its module and one line in `registry.REGISTRY`; the config, the CLI and the docs'
table follow from the registry, and nothing here needs to name it (the re-exports below are
for the kinds older code imports from this package). Each `apply` sends the whole desired
state, so sending it again is harmless; the controller's reconcile loop does exactly that,
which is how a failed call or a restarted router catches up. Secrets (bearer tokens, HMAC
keys) are held privately and never appear in errors, logs or reprs.
"""

from lanewatch.collector.common.headers import SIGNATURE_HEADER, TIMESTAMP_HEADER

from .base import ALL_ACTIONS, Adapter, AdapterError, AdapterSettings, RouterView, read_secret, restrict
from .dry_run import DryRunAdapter, DryRunSettings
from .envoy import EnvoyAdapter, EnvoySettings
from .gateway import GatewayAdapter, GatewaySettings
from .http import HttpAdapterSettings, Retry
from .nginx import NginxAdapter, NginxSettings
from .registry import REGISTRY, Registry, choose
from .webhook import WebhookAdapter, WebhookSettings, sign

__all__ = [
    "ALL_ACTIONS",
    "REGISTRY",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "Adapter",
    "AdapterError",
    "AdapterSettings",
    "DryRunAdapter",
    "DryRunSettings",
    "EnvoyAdapter",
    "EnvoySettings",
    "GatewayAdapter",
    "GatewaySettings",
    "HttpAdapterSettings",
    "NginxAdapter",
    "NginxSettings",
    "Registry",
    "Retry",
    "RouterView",
    "WebhookAdapter",
    "WebhookSettings",
    "choose",
    "read_secret",
    "restrict",
    "sign",
]
