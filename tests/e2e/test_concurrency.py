"""Several people on one server at once: everyone gets their answer, the model loads once.

The light version of ``benchmarks/concurrent_users.py`` (which runs ten users): four browser
sessions on the test session's server use the Leakage lab and the Dataset explorer at the
same moment.
"""
import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
USERS = 4


@pytest.fixture(scope="module")
def crowd(require_browser, streamlit_server):
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "concurrent_users.py"), "--json",
                        "--users", str(USERS), "--rounds", "1", "--model", "tiny-rope",
                        "--url", streamlit_server.url, "--pid", str(streamlit_server.pid),
                        "--log", str(streamlit_server.log_path)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.stdout.startswith("{"), r.stderr[-3000:]
    return json.loads(r.stdout)


@pytest.mark.browser
def test_every_concurrent_user_sees_their_verdict_and_numbers(crowd):
    failed = [u for u in crowd["per_user"] if not u["ok"]]
    assert failed == [] and crowd["users_ok"] == USERS, json.dumps(failed, indent=1)


@pytest.mark.browser
def test_concurrent_users_leave_no_traceback_in_the_server_log(crowd):
    assert crowd["server_tracebacks"] == 0


@pytest.mark.browser
def test_server_memory_stays_bounded_under_concurrent_users(crowd):
    assert crowd["server_rss_growth_mb"] < crowd["goal_growth_mb"], crowd


def _cached_functions(path: Path) -> dict[str, str]:
    """function name -> its st.cache_* decorator ('' if none), for every top-level function."""
    tree = ast.parse(path.read_text())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            names = [ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list]
            found[node.name] = next((n for n in names if "cache_" in n), "")
    return found


def _loaders(path: Path) -> set[str]:
    """Top-level functions of ``path`` that build or load a model."""
    tree = ast.parse(path.read_text())
    loads = {"load_pretrained", "load_model", "tiny_model", "from_pretrained", "TinyTransformer", "load"}
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)
            and any(isinstance(c, ast.Call) and ast.unparse(c.func).split(".")[-1] in loads
                    for c in ast.walk(node))}


def test_leakage_lab_builds_every_model_inside_st_cache_resource():
    """One model per server process, shared by every session (loaded once, never per user)."""
    page = ROOT / "app_pages" / "leakage_lab.py"
    loaders, decorators = _loaders(page), _cached_functions(page)
    assert loaders, f"no model loader found in {page.name}"
    assert {f: decorators[f] for f in loaders} == {f: "st.cache_resource" for f in loaders}
    # and no model is built anywhere else: not at module level, not in an uncached helper
    loads = {"load_pretrained", "load_model", "tiny_model", "from_pretrained", "TinyTransformer", "load"}
    tree = ast.parse(page.read_text())
    stray = [ast.unparse(c) for node in tree.body if not (isinstance(node, ast.FunctionDef) and node.name in loaders)
             for c in ast.walk(node) if isinstance(c, ast.Call) and ast.unparse(c.func).split(".")[-1] in loads]
    assert stray == [], f"{page.name} builds a model outside its cached loaders: {stray}"


# ---------------------------------------------------------------- one shared model, many threads
def test_two_sessions_sharing_one_cached_hf_model_get_the_logits_they_would_get_alone():
    """Streamlit runs each session in its own thread; ``st.cache_resource`` shares one model."""
    import threading

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from packing_core.batch import segment_layout
    from packing_core.models.hf_attention import hf_runner

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                                         num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                                         max_position_embeddings=128)).eval()
    layout = segment_layout([12, 8, 10], positions="continuous")
    args = (torch.randint(0, 256, (30,)), torch.as_tensor(layout.position_ids), layout.cu_seqlens, 12)
    run = hf_runner(model, "segments")
    alone = run(*args)

    # Interleave two calls the way two sessions can: A enters first, B enters while A runs,
    # A returns while B is still inside its forward pass.
    b_inside, a_returned, out = threading.Event(), threading.Event(), {}

    def pause(module, inputs, output):
        if threading.current_thread().name == "A" and not b_inside.is_set():
            b_inside.wait(2)
        elif threading.current_thread().name == "B" and not b_inside.is_set():
            b_inside.set()
            a_returned.wait(2)

    def session_a():
        out["a"] = run(*args)
        a_returned.set()

    hook = model.model.layers[0].register_forward_hook(pause)
    threads = [threading.Thread(target=session_a, name="A"),
               threading.Thread(target=lambda: out.update(b=run(*args)), name="B")]
    threads[0].start()
    threads[1].start()
    for t in threads:
        t.join(30)
    hook.remove()
    assert torch.allclose(out["a"], alone, atol=1e-5)
    assert torch.allclose(out["b"], alone, atol=1e-5), f"max |diff| {(out['b'] - alone).abs().max():.3g}"
