"""``gem train`` reaches the same Hydra app through gem's command hook."""

from __future__ import annotations

from gem_train import plugin


class Commands:
    def __init__(self) -> None:
        self.commands: dict[str, tuple] = {}

    def register(self, name, func, help=""):
        self.commands[name] = (func, help)


def test_registers_train_and_runs_the_app(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # Hydra makes its run folder under the working directory
    cli = Commands()
    plugin.gem_register_commands(cli)
    func, help_text = cli.commands["train"]
    assert "RL" in help_text
    assert func(["--cfg", "job", "algo=grpo"]) == 0
    printed = capsys.readouterr().out
    assert "name: grpo" in printed and "id: game:GuessTheNumber-v0-easy" in printed
