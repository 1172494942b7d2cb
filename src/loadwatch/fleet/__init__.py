"""A fleet: several vLLM replicas behind a router (docs/guides/fleet.md).

loadwatch starts one on this machine (`--replicas N`: N embedded engines and a router in front of
them, vllm-router or `--router smg`), or reads the user's own (`--target ROUTER --replica NAME=URL`, or
the replicas the router lists). Either way each replica is a sidecar target under its own name, the
router's metrics are read beside them, and each request's record names the replica that served it.
"""
