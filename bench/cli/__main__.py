from bench.cli.main import main

raise SystemExit(main())
