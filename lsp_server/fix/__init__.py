"""What makes a fix: where it goes and the attempts (`fixing`), and what proves it — still
running the failing code, and the cells that depend on it (`fixcheck`)."""
