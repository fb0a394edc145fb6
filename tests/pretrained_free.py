"""No checkpoint downloads while a test or benchmark builds a config's model.

Dependency-free: imported by the tests, the benchmarks and the workers and scripts they run inside the real
2.x / 0.x environments (whose Python finds this folder on sys.path).
"""


def strip_pretrained(node):
    """Clear ``pretrained`` and ``init_cfg=dict(type='Pretrained', ...)`` everywhere in a config
    node (dicts and lists, in place)."""
    if isinstance(node, dict):
        if isinstance(node.get("init_cfg"), dict) and node["init_cfg"].get("type") == "Pretrained":
            node["init_cfg"] = None
        if "pretrained" in node:
            node["pretrained"] = None
        for value in node.values():
            strip_pretrained(value)
    elif isinstance(node, list):
        for value in node:
            strip_pretrained(value)
