"""disagg operator: DisaggregatedDeployment → prefill/decode pods with a derived KV config."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("disagg")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+unknown"
