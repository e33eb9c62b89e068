"""Algorithm plugins and their shared math. Importing this package stays cheap: plugins are
loaded lazily by `algorithms.registry`."""

PLUGIN_API = 2
"""The version of the plugin contract (`algorithms.base`, the shared math plugins call, the names
the registry reads). A change keeps the previous form working, with one warning naming what to
change, for at least one version; the changelog is in algorithms/README.md."""
