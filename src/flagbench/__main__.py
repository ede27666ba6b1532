from flagbench.cli import main

raise SystemExit(main())
