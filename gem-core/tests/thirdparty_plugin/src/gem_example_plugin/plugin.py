import gem


@gem.hookimpl
def gem_register_envs(registry):
    registry.register("example:Reverse-v0", "gem_example_plugin.envs:ReverseEnv", length=5)


@gem.hookimpl
def gem_register_commands(cli):
    cli.register("example-hello", hello, help="say hello from the example plugin")


def hello(argv):
    print("hello from gem-example-plugin", *argv)
    return 0
