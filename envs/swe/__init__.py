"""SWE environments: SWE-bench-schema instances, runtimes (local sandbox, Docker), the agent scaffold."""
