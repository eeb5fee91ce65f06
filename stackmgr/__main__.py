from stackmgr.entry import main

raise SystemExit(main())
