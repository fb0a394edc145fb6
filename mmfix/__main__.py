from mmfix.cli import main

raise SystemExit(main())
