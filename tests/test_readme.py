"""Every ```python block of README.md runs as written: the blocks are executed in
order in one namespace (a block may use the names of the blocks before it), in a
temporary working directory, so no snippet of the README can rot."""
import importlib.util
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def python_blocks(text: str):
    """``(first line number, source)`` of every ```python block of ``text``."""
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in _BLOCK.finditer(text)]


def test_blocks_are_found_with_their_line_numbers():
    text = "intro\n```python\na = 1\n```\n```bash\nls\n```\n```python\nb = a\n```\n"
    assert python_blocks(text) == [(3, "a = 1\n"), (9, "b = a\n")]


def test_every_python_block_of_the_readme_runs_in_order(tmp_path, monkeypatch):
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 5, "README.md lost its code blocks"
    monkeypatch.chdir(tmp_path)           # whatever a snippet writes lands here
    has_onnx = importlib.util.find_spec("onnx") is not None
    namespace = {"__name__": "readme"}
    for line, source in blocks:
        if "graphc.onnx" in source and not has_onnx:
            continue                      # the one optional dependency: '.[onnx]'
        # compiled at its place in the README, so a traceback points at the snippet's line
        exec(compile("\n" * (line - 1) + source, str(README), "exec"), namespace)


def test_the_readme_keeps_the_section_on_atomic_and_shared_runs():
    text = README.read_text(encoding="utf-8")
    assert "## Runs are all or nothing, and safe to share" in text
