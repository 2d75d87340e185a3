;;; shell.el --- Emacs + eglot, batch mode: a shell script runs in bash_kernel.  -*- lexical-binding: t -*-
;; runfix serves sh-mode as the README's eglot line says; eglot names the language `sh'
;; (its mode's name), and runfix.run runs the script in bash, its output on its line.
;; Writes $RUNFIX_EGLOT_REPORT as JSON (tests/test_eglot.py asserts).
(require 'cl-lib)
(require 'json)
(dolist (dir (directory-files "/usr/share/emacs/site-lisp/elpa" t "^[a-z]"))
  (add-to-list 'load-path dir))
(require 'eglot)
(require 'flymake)

(defvar report nil)
(defun say (key value) (push (cons key value) report))
(defun wait (seconds pred)
  "Let processes run until PRED holds or SECONDS pass; PRED's last value."
  (let ((until (+ (float-time) seconds)) (ok nil))
    (while (and (not (setq ok (funcall pred))) (< (float-time) until))
      (accept-process-output nil 0.05))
    ok))
(defun messages ()
  (flymake-start)
  (accept-process-output nil 0.2)
  (mapcar #'flymake-diagnostic-text (flymake-diagnostics)))

(condition-case err
    (let* ((file (getenv "RUNFIX_EGLOT_FILE"))
           (command (append (json-read-from-string (getenv "RUNFIX_EGLOT_CMD")) nil))
           (eglot-server-programs `(((python-mode sh-mode r-mode typescript-mode js-mode) . ,command))))
      (find-file file)
      (sh-mode)
      (apply #'eglot (eglot--guess-contact))
      (let ((server (eglot-current-server))
            (uri (concat "file://" (expand-file-name file))))
        (say 'attached (and server t))
        (let ((ran (jsonrpc-request server :workspace/executeCommand
                                    `(:command "runfix.run" :arguments [(:uri ,uri)])
                                    :timeout 60)))
          (say 'run (plist-get ran :status)))
        (say 'result (wait 20 (lambda () (cl-some (lambda (m) (string-match-p "42" m))
                                                  (messages)))))
        (say 'diagnostics (vconcat (messages)))
        (eglot-shutdown server)))
  (error (say 'error (format "%S" err))))
(with-temp-file (getenv "RUNFIX_EGLOT_REPORT")
  (insert (json-encode report)))
(kill-emacs 0)
