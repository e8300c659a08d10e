import gem


class ReverseEnv(gem.Env):
    """Reverse a random lowercase word; one turn."""

    def __init__(self, length=5):
        self.length = length
        self.word = ""

    def reset(self, seed=None, **kwargs):
        super().reset(seed)
        self.word = "".join(self.rng.choice("abcdefghij") for _ in range(self.length))
        return f"Reverse this word: {self.word}", {}

    def step(self, action):
        correct = action.strip() == self.word[::-1]
        return "", float(correct), True, False, {"correct": correct}

    def sample_random_action(self):
        return "".join(self.rng.choice("abcdefghij") for _ in range(self.length))

    def get_state(self):
        return {"word": self.word, "rng": self.rng_state()}

    def set_state(self, state):
        self.word = state["word"]
        self.set_rng_state(state["rng"])
