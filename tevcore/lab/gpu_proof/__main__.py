from tevcore.lab.gpu_proof.cli import main

raise SystemExit(main())
