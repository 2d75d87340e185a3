;;; complete.el --- Emacs + eglot, batch mode: completion from the live kernel.  -*- lexical-binding: t -*-
;; The file runs; then `df["' and `cfg.' are typed and completed as `completion-at-point'
;; does (eglot's capf table, which asks the server). Writes $RUNFIX_EGLOT_REPORT as JSON
;; (tests/test_eglot.py asserts).
(require 'cl-lib)
(require 'json)
(dolist (dir (directory-files "/usr/share/emacs/site-lisp/elpa" t "^[a-z]"))
  (add-to-list 'load-path dir))
(require 'eglot)

(defvar report nil)
(defun say (key value) (push (cons key value) report))
(defun candidates-after (text)
  "Type TEXT on a new last line; what `completion-at-point' would offer there."
  (goto-char (point-max))
  (insert text)
  (let* ((capf (eglot-completion-at-point))
         (table (nth 2 capf))
         (typed (buffer-substring-no-properties (nth 0 capf) (nth 1 capf))))
    (prog1 (vconcat (all-completions typed table))
      (insert "\n"))))

(condition-case err
    (let* ((file (getenv "RUNFIX_EGLOT_FILE"))
           (eglot-server-programs
            `((python-mode . ,(append (json-read-from-string (getenv "RUNFIX_EGLOT_CMD")) nil)))))
      (find-file file)
      (python-mode)
      (apply #'eglot (eglot--guess-contact))
      (let ((server (eglot-current-server))
            (uri (concat "file://" (expand-file-name file))))
        (say 'attached (and server t))
        (let ((ran (jsonrpc-request server :workspace/executeCommand
                                    `(:command "runfix.run" :arguments [(:uri ,uri)])
                                    :timeout 90)))
          (say 'ran (plist-get ran :status)))
        (say 'keys (candidates-after "df[\""))
        (say 'attributes (candidates-after "cfg."))
        (eglot-shutdown server)))
  (error (say 'error (format "%S" err))))

(with-temp-file (getenv "RUNFIX_EGLOT_REPORT")
  (insert (json-encode report)))
(kill-emacs 0)
