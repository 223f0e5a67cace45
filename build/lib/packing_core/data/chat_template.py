"""A chat template read as code: does it only print each message's content, and what does it print around it?

A chat template is a Jinja program. Most print every message as ``frame + content + frame``,
where the frames depend on the roles and the positions only (SmolLM2's, ChatML's)::

    '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'

For such a template the rendering of a chat is its frames with the contents in between, and
the frames of all chats with the same roles are the same: rendered once, with stand-in
contents (:func:`frames`), they serve every chat of those roles. :func:`prints_content_only`
decides it from the template's syntax tree: each read of a message's content
(``message['content']``, ``message.content``, ``message.get('content')``) must go straight
into the output, joined with ``+`` or ``~`` and nothing else: no test (``if message['content']``),
no filter (``| trim``), no method (``.strip()``), no variable. The stand-ins then confirm it: each
must come out once, in order, unchanged (they hold spaces, quotes and a new line, which
``trim``, ``tojson`` or ``e`` would change).

    >>> tpl = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}</s>{% endfor %}"
    >>> prints_content_only(tpl), prints_content_only("{{ messages[0]['content'] | trim }}")
    (True, False)
    >>> frames(lambda msgs, gen: render(tpl, msgs, gen), ("user", "assistant"), False)
    ('<user>', '</s><assistant>', '</s>')

:func:`render` renders a template the way transformers' ``apply_chat_template(tokenize=False)``
does (``transformers.utils.chat_template_utils``: ``_cached_compile_jinja_template`` builds an
``ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)`` with the
``loopcontrols`` extension, a ``{% generation %}`` tag and its own ``tojson``, and
``render_jinja_template`` calls ``render(messages=..., tools=None, documents=None,
add_generation_prompt=...)``), without importing transformers, for templates that read no
other variable (:func:`renders_alone`): no special token, no tool, no date.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from functools import lru_cache

__all__ = ["frames", "prints_content_only", "render", "renders_alone"]

# what a template may read and still be rendered here (transformers passes special tokens besides)
_OWN_NAMES = frozenset({"messages", "add_generation_prompt", "raise_exception", "range", "namespace", "dict", "loop"})
_MIN_JINJA = (3, 1, 6)    # transformers refuses older jinja2 (sandbox escapes): so does this module
# a stand-in content: private-use characters to find it, and what trim / tojson / escaping would change
_STAND_IN = ' \n"<&x\ue000{}\ue001x&>"\n '
_FOUND = re.compile("\ue000([0-9]+)\ue001")


class TemplateError(Exception):
    """A template that raised while rendering (``raise_exception`` or a Jinja error), with its message."""


@lru_cache(maxsize=16)
def _environment():
    import jinja2
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(Extension):
        """``{% generation %}...{% endgeneration %}`` prints its body (transformers' AssistantTracker)."""

        tags = {"generation"}

        def parse(self, parser):
            next(parser.stream)
            return parser.parse_statements(("name:endgeneration",), drop_needle=True)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


@lru_cache(maxsize=16)
def _parsed(template: str):
    """(syntax tree, compiled template), or None when this jinja2 cannot read it as transformers would."""
    import jinja2

    if tuple(int(p) for p in re.findall(r"[0-9]+", jinja2.__version__)[:3]) < _MIN_JINJA:
        return None
    env = _environment()
    try:
        return env.parse(template), env.from_string(template)
    except jinja2.TemplateError:
        return None


@lru_cache(maxsize=64)
def renders_alone(template: str | None) -> bool:
    """Whether :func:`render` renders ``template`` exactly as transformers does: it reads only
    ``messages`` and ``add_generation_prompt`` (and the helpers every template has).

    >>> renders_alone("{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}")
    False
    """
    from jinja2 import meta

    parsed = _parsed(template) if isinstance(template, str) else None
    return parsed is not None and meta.find_undeclared_variables(parsed[0]) <= _OWN_NAMES


def render(template: str, messages: list[dict], add_generation_prompt: bool = False) -> str:
    """The chat rendered by ``template`` (one that :func:`renders_alone`), as transformers renders it."""
    import jinja2

    parsed = _parsed(template)
    if parsed is None:
        raise TemplateError("the chat template cannot be read by jinja2")
    if not messages:   # transformers' apply_chat_template refuses an empty chat first
        raise ValueError("Cannot apply chat template to an empty conversation. Provide at least one message.")
    try:
        return parsed[1].render(messages=messages, tools=None, documents=None,
                                add_generation_prompt=add_generation_prompt)
    except jinja2.TemplateError as e:
        raise TemplateError(str(e)) from None


def _content_read(node) -> bool:
    """``x['content']``, ``x.content`` or ``x.get('content', ...)``: a read of a message's content."""
    from jinja2 import nodes

    if isinstance(node, nodes.Getitem):
        return isinstance(node.arg, nodes.Const) and node.arg.value == "content"
    if isinstance(node, nodes.Getattr):
        return node.attr == "content"
    return (isinstance(node, nodes.Call) and isinstance(node.node, nodes.Getattr) and node.node.attr == "get"
            and bool(node.args) and isinstance(node.args[0], nodes.Const) and node.args[0].value == "content")


@lru_cache(maxsize=64)
def prints_content_only(template: str | None) -> bool:
    """Whether every read of a message's content goes straight to the output (see the module's text)."""
    from jinja2 import nodes

    parsed = _parsed(template) if isinstance(template, str) else None
    if parsed is None:
        return False
    reads: set[int] = set()     # the 'content' constants that belong to a read already judged
    closed = (nodes.Macro, nodes.CallBlock, nodes.FilterBlock, nodes.AssignBlock)

    def visit(node, path: tuple) -> bool:
        if _content_read(node):
            # through + and ~ (Concat) only, up to an {{ }} that is not inside a macro or a captured block
            at = len(path) - 1
            while at >= 0 and isinstance(path[at], (nodes.Add, nodes.Concat)):
                at -= 1
            if at < 0 or not isinstance(path[at], nodes.Output) or any(isinstance(p, closed) for p in path[:at]):
                return False
            arg = node.args[0] if isinstance(node, nodes.Call) else getattr(node, "arg", None)
            if arg is not None:
                reads.add(id(arg))
        elif isinstance(node, nodes.Const) and node.value == "content" and id(node) not in reads:
            return False   # 'content' named some other way: map(attribute='content'), a variable key, ...
        return all(visit(child, (*path, node)) for child in node.iter_child_nodes())

    return visit(parsed[0], ())


def frames(render_chat: Callable[[list[dict], bool], str], roles: Sequence[str], add_generation_prompt: bool
           ) -> tuple[str, ...] | None:
    """The texts around the contents of a chat with these ``roles``: ``len(roles) + 1`` of them, or None.

    ``render_chat(messages, add_generation_prompt)`` renders with the tokenizer's template;
    the rendering of any chat of these roles is then ``frames[0] + content[0] + frames[1] + ...``
    when the template :func:`prints_content_only`. None when a stand-in did not come out once,
    in order and unchanged.
    """
    stand_ins = [_STAND_IN.format(i) for i in range(len(roles))]
    text = render_chat([{"role": r, "content": s} for r, s in zip(roles, stand_ins)], add_generation_prompt)
    if not isinstance(text, str) or [int(m) for m in _FOUND.findall(text)] != list(range(len(roles))):
        return None
    out: list[str] = []
    rest = text
    for s in stand_ins:
        before, sep, rest = rest.partition(s)
        if not sep:
            return None
        out.append(before)
    out.append(rest)
    return tuple(out)
