def register_builtin(cli):
    pass
