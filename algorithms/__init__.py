"""Algorithm plugins and their shared math. Importing this package stays cheap: plugins are
loaded lazily by `algorithms.registry`."""
