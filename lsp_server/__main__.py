import sys

from lsp_server.cli.main import main

sys.exit(main())
