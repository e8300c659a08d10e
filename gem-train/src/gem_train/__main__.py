from gem_train.cli import main

main()
