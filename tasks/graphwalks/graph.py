"""GraphWalks at an exact length: this project's protocol, not the released set's.

A graph is drawn to fill the model-token budget: the prompt has the released rows' shape (the
instructions and worked examples, "Here is the graph to operate on:", the edge list, the operation,
the closing instruction: PROMPT_HEAD, PROMPT_TAIL) and node names as in the released rows (the
first 10 hex digits of md5 of the node's number). The length unit is one edge line. Edges are
listed by source in node order, OUT_DEGREE per source (the last with what is left), each to a
target drawn uniformly, repeats and self loops allowed, as in the released rows, among a node set
sized once from the budget (`universe`: about as many nodes as the budget holds sources). The
edge list with n edges is the first n of one seeded stream, so a sample with one more edge only
adds a line: tokens grow with n, and the fit lands within one edge line of the budget.

The operation: parents of a node (the distinct sources of edges into it, itself excluded), or a
BFS from a node to a depth in BFS_DEPTHS (the nodes whose shortest distance from it is exactly that
depth, as the released instructions say: "only return the nodes that are reachable at that depth").
Its node is the first, in an order drawn once, whose answer is not empty (an empty gold set scores
0 whatever the answer, tasks.graphwalks.grading); the depth is drawn once too. Everything is drawn
from (task, version, length, index, seed), so any subset of samples regenerates identically.
"""

from __future__ import annotations

import hashlib
import math
from collections import deque

import numpy as np

from harness.core.errors import UserError
from tasks.ruler.fitting import Counter, sample_rng

OUT_DEGREE = 4
BFS_DEPTHS = (1, 2, 3)
MIN_EDGES = 4 * OUT_DEGREE
_BLOCK = 4096

PROMPT_HEAD = (
    "You will be given a graph as a list of directed edges. All nodes are at least degree 1. "
    "You will also get a description of an operation to perform on the graph.\n"
    "Your job is to execute the operation on the graph and return the set of nodes that the operation results in. "
    "If asked for a breadth-first search (BFS), only return the nodes that are reachable at that depth, "
    "do not return the starting node. If asked for the parents of a node, only return the nodes that have an "
    "edge leading to the given node, do not return the given node itself.\n\n"
    "Here is an example:\n<begin example>\n\n"
    "The graph has the following edges:\nuvwx -> alke\nabcd -> uvwx\nabcd -> efgh\nefgh -> uvwx\n\n"
    "Example 1:\nOperation:\nPerform a BFS from node abcd with depth 1.\nFinal Answer: [uvwx, efgh]\n\n"
    "Example 2:\nOperation:\nPerform a BFS from node alke with depth 1.\nFinal Answer: []\n\n"
    "Example 3:\nOperation:\nFind the parents of node uvwx.\nFinal Answer: [abcd, efgh]\n\n"
    "Example 4:\nOperation:\nFind the parents of node abcd.\nFinal Answer: []\n\n"
    "<end example>\n"
    "Here is the graph to operate on:\nThe graph has the following edges:\n"
)
PROMPT_TAIL = (
    "You should immediately return the set of nodes that the operation results in, with no additional text. "
    "Return your final answer as a list of nodes in the very last line of your response.\n"
)


def node_name(i: int) -> str:
    return hashlib.md5(str(i).encode()).hexdigest()[:10]


def draw_targets(parts: tuple, universe: int, n: int) -> list[int]:
    """The first n targets of the plan's stream, in blocks of _BLOCK drawn from (parts, block)."""
    out: list[int] = []
    for block in range(math.ceil(n / _BLOCK)):
        rng = np.random.default_rng(sample_rng(*parts, "targets", universe, block).getrandbits(64))
        out += rng.integers(0, universe, size=_BLOCK).tolist()
    return out[:n]


def edges_of(targets: list[int]) -> list[tuple[int, int]]:
    """Edges listed by source in node order, OUT_DEGREE per source."""
    return [(j // OUT_DEGREE, t) for j, t in enumerate(targets)]


def parents(edges: list[tuple[int, int]], node: int) -> list[int]:
    return sorted({s for s, t in edges if t == node and s != node})


def bfs_at_depth(edges: list[tuple[int, int]], start: int, depth: int) -> list[int]:
    """Nodes whose shortest distance from `start` is exactly `depth` (never `start` itself)."""
    out: dict[int, list[int]] = {}
    for s, t in edges:
        out.setdefault(s, []).append(t)
    dist = {start: 0}
    queue = deque([start])
    while queue:
        u = queue.popleft()
        if dist[u] == depth:
            continue
        for v in out.get(u, ()):
            if v not in dist:
                dist[v] = dist[u] + 1
                queue.append(v)
    return sorted(v for v, d in dist.items() if d == depth)


def operation(kind: str, edges: list[tuple[int, int]], order: list[int], depth: int) -> tuple[str, list[int]] | None:
    """(operation line, answer nodes): the first node of `order` with a non-empty answer (at
    `depth`, else at the other depths in turn); None when none has one."""
    if kind == "parents":
        for node in order:
            found = parents(edges, node)
            if found:
                return f"Find the parents of node {node_name(node)}.", found
        return None
    for d in (depth, *[x for x in BFS_DEPTHS if x != depth]):
        for node in order:
            found = bfs_at_depth(edges, node, d)
            if found:
                return f"Perform a BFS from node {node_name(node)} with depth {d}.", found
    return None


def render_prompt(edges: list[tuple[int, int]], op: str) -> str:
    lines = "\n".join(f"{node_name(s)} -> {node_name(t)}" for s, t in edges)
    return f"{PROMPT_HEAD}{lines}\n\nOperation:\n{op}\n\n{PROMPT_TAIL}"


class GraphPlan:
    """A fitting plan (tasks.ruler.fitting.Plan) whose unit is one edge line."""

    min_units = MIN_EDGES
    max_units = None

    def __init__(self, kind: str, parts: tuple, counter: Counter, budget: int):
        self.kind, self.parts = kind, parts
        self._last: tuple[int, tuple[list[tuple[int, int]], str, list[int]]] | None = None
        # tokens of one edge line, measured on lines of 64 nodes drawn for this plan
        sample = edges_of(draw_targets((*parts, "line-cost"), 64, 256))
        text = "".join(f"{node_name(s)} -> {node_name(t)}\n" for s, t in sample)
        self.line = max(1.0, counter.pieces([text])[0] / 256)
        # the node set: about as many nodes as the budget holds sources (fixed before any fit)
        self.universe = max(MIN_EDGES // OUT_DEGREE, math.ceil(budget / (self.line * OUT_DEGREE)))
        rng = sample_rng(*parts, "operation")
        self.order = list(range(self.universe))
        rng.shuffle(self.order)
        self.depth = rng.choice(BFS_DEPTHS)

    def graph(self, n: int) -> tuple[list[tuple[int, int]], str, list[int]]:
        """(edges, operation line, answer nodes) with n edges. The last one is kept: the fit
        renders a count, then its answer is read."""
        if self._last is None or self._last[0] != n:
            edges = edges_of(draw_targets(self.parts, self.universe, n))
            op = operation(self.kind, edges, self.order, self.depth)
            if op is None:  # every edge a self loop: only conceivable in the smallest graphs
                raise UserError(
                    f"GraphWalks {self.kind}: no node has an answer in the {n}-edge graph; use a longer length"
                )
            self._last = (n, (edges, op[0], op[1]))
        return self._last[1]

    def render(self, n: int) -> tuple[str, str]:
        edges, op, _ = self.graph(n)
        return render_prompt(edges, op), ""

    def answer(self, n: int) -> list[str]:
        return [node_name(v) for v in self.graph(n)[2]]

    def guess(self, tokens_left: float) -> int:
        return int(self.min_units + tokens_left / self.line) + 1

    def model(self, n: np.ndarray) -> np.ndarray:
        return n * self.line
