"""What the verbs share: the runner, the one place code runs for the user (`runner`), with
what happens around each piece's run (`steps`); the gate in front of a folder's kernel
(`gate`); a document's results desk (`desk`); reads of its kernel for the model (`reads`);
installing into it (`installs`). A service imports the session and the leaves, never a
verb, `fix/` or the face."""
