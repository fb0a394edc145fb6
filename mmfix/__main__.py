from mmfix._cli import main

raise SystemExit(main())
