"""What the benchmark scripts share: writing their JSON results."""
import json
import os


def write_json(result: dict, path: str) -> None:
    """Write ``result`` to ``path`` (creating its folder) and say where."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {os.path.relpath(path)}")
