"""Services the verbs share beside the gate and the runner: a document's results desk
(`desk`), reads of its kernel for the model (`reads`), installing into it (`installs`)."""
