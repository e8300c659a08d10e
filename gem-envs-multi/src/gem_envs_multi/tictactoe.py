"""Tic-Tac-Toe for two agents, ``x`` (moves first) and ``o``; the scripted ``solver`` plays perfectly.

Moves are cell numbers 1-9 in ``\\boxed{}`` (1 top left, 9 bottom right). A taken cell
wastes the turn. Rewards: win 1, draw 0.5 each, loss 0.

>>> game = TicTacToe()
>>> _ = game.reset(seed=0)
>>> game.step({"x": "\\\\boxed{5}"})[1]
{'x': 0.0, 'o': 0.0}
>>> game.board[4]
'X'
"""

from __future__ import annotations

from functools import cache
from typing import Any

from gem_envs_multi.base import TextGame

LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
MARK = {"x": "X", "o": "O"}


def winner(board: str) -> str | None:
    """``"X"``/``"O"`` when that mark holds a line, else None."""
    for a, b, c in LINES:
        if board[a] != "." and board[a] == board[b] == board[c]:
            return board[a]
    return None


@cache
def _value(board: str, mark: str) -> int:
    """Minimax value of ``board`` with ``mark`` to move, from ``mark``'s side: 1 win, 0 draw, -1 loss."""
    won = winner(board)
    if won is not None:
        return 1 if won == mark else -1
    if "." not in board:
        return 0
    other = "O" if mark == "X" else "X"
    return max(-_value(board[:i] + mark + board[i + 1:], other) for i, c in enumerate(board) if c == ".")


def best_moves(board: str, mark: str) -> list[int]:
    """The cells (0-8) that keep the best minimax value for ``mark``."""
    other = "O" if mark == "X" else "X"
    scored = [(-_value(board[:i] + mark + board[i + 1:], other), i) for i, c in enumerate(board) if c == "."]
    best = max(score for score, _ in scored)
    return [i for score, i in scored if score == best]


class TicTacToe(TextGame):
    agent_names = ("x", "o")
    scripted_players = ("random", "solver")
    default_opponent = "solver"
    format_hint = "no cell number 1-9 in \\boxed{}"

    def __init__(self, max_steps: int = 30) -> None:
        super().__init__(max_steps)
        self.board = "." * 9

    def new_episode(self) -> None:
        self.board = "." * 9

    def rules(self, agent: str) -> str:
        return (f"Tic-Tac-Toe. You play {MARK[agent]}; X moves first. Put three of your marks in a row, column or "
                "diagonal to win. Answer with a cell number in \\boxed{}, e.g. \\boxed{5}; cells are numbered 1-9 "
                "from the top left, row by row. Win 1, draw 0.5, loss 0.")

    def view(self, agent: str) -> str:
        cells = [c if c != "." else str(i + 1) for i, c in enumerate(self.board)]
        rows = [" " + " | ".join(cells[r * 3:r * 3 + 3]) for r in range(3)]
        return "Board:\n" + "\n---+---+---\n".join(rows)

    def parse_move(self, agent: str, boxed: str) -> int | None:
        text = boxed.strip()
        return int(text) if text.isascii() and text.isdigit() and len(text) <= 2 else None

    def play(self, moves: dict[str, Any]) -> dict[str, float] | None:
        (agent, cell), = moves.items()
        other = "o" if agent == "x" else "x"
        if not 1 <= cell <= 9 or self.board[cell - 1] != ".":
            self.tell(agent, f"Cell {cell} is not free: you lost your turn.")
            self.tell(other, f"{MARK[agent]} tried cell {cell}, which is not free, and lost the turn.")
            return None
        i = cell - 1
        self.board = self.board[:i] + MARK[agent] + self.board[i + 1:]
        self.tell(agent, f"You played {cell}.")
        self.tell(other, f"{MARK[agent]} played {cell}.")
        if winner(self.board):
            self.finish(f"The game is over: {MARK[agent]} wins.")
            return {agent: 1.0, other: 0.0}
        if "." not in self.board:
            self.finish("The game is over: a draw.")
            return {agent: 0.5, other: 0.5}
        return None

    def sample_random_action(self, agent: str | None = None) -> str:
        free = [i + 1 for i, c in enumerate(self.board) if c == "."] or [1]
        return f"\\boxed{{{self.rng.choice(free)}}}"

    def scripted_action(self, agent: str, player: str) -> str:
        if player == "solver" and "." in self.board:
            return f"\\boxed{{{self.rng.choice(best_moves(self.board, MARK[agent])) + 1}}}"
        return super().scripted_action(agent, player)

    def game_state(self) -> dict[str, Any]:
        return {"board": self.board}

    def load_game_state(self, state: dict[str, Any]) -> None:
        self.board = state["board"]
