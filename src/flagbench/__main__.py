from flagbench.cli import process_main

process_main()
