from tevcore.cli import main

raise SystemExit(main())
