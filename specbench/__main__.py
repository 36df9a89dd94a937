from specbench.cli.app import main

if __name__ == "__main__":  # a spawned worker (selftest --jobs) imports this module as __mp_main__: no second CLI run
    main()
