from stackmgr.cli.entry import main

raise SystemExit(main())
