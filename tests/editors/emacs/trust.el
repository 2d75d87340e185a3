;;; trust.el --- Emacs + eglot, batch mode: a hostile repository's file under runfix.  -*- lexical-binding: t -*-
;; Opening it, hovering and asking for code actions start nothing; a run asks, and Emacs in
;; batch mode cannot answer, so nothing runs and the line says why; the folder is then
;; trusted as its quick fix does (runfix.trust, runfix's own Python) and the run works.
;; Writes $RUNFIX_EGLOT_REPORT as JSON (tests/test_eglot.py asserts).
(require 'cl-lib)
(require 'json)
(dolist (dir (directory-files "/usr/share/emacs/site-lisp/elpa" t "^[a-z]"))
  (add-to-list 'load-path dir))
(require 'eglot)
(require 'flymake)

(defvar report nil)
(defun say (key value) (push (cons key value) report))
(defun marks () (directory-files (getenv "RUNFIX_EGLOT_MARKS") nil "^[^.]"))
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
           (eglot-server-programs
            `((python-mode . ,(append (json-read-from-string (getenv "RUNFIX_EGLOT_CMD")) nil)))))
      (find-file file)
      (python-mode)
      (apply #'eglot (eglot--guess-contact))
      (let ((server (eglot-current-server))
            (uri (concat "file://" (expand-file-name file))))
        (say 'attached (and server t))
        (jsonrpc-request server :textDocument/hover
                         `(:textDocument (:uri ,uri) :position (:line 2 :character 0)))
        (jsonrpc-request server :textDocument/codeAction
                         `(:textDocument (:uri ,uri)
                           :range (:start (:line 1 :character 0) :end (:line 1 :character 0))
                           :context (:diagnostics [])))
        (wait 1.5 (lambda () nil))
        (say 'marks_before_run (vconcat (marks)))
        (let ((ran (jsonrpc-request server :workspace/executeCommand
                                    `(:command "runfix.run" :arguments [(:uri ,uri)]))))
          (say 'first_run (plist-get ran :status)))
        (say 'told (wait 10 (lambda () (cl-some (lambda (m) (string-match-p "nothing ran" m))
                                                 (messages)))))
        (jsonrpc-request server :workspace/executeCommand
                         `(:command "runfix.trust" :arguments [(:uri ,uri :choice "own")]))
        (let ((ran (jsonrpc-request server :workspace/executeCommand
                                    `(:command "runfix.run" :arguments [(:uri ,uri)])
                                    :timeout 60)))
          (say 'second_run (plist-get ran :status)))
        (say 'result (wait 20 (lambda () (cl-some (lambda (m) (string-match-p "→ 42" m))
                                                  (messages)))))
        (say 'diagnostics (vconcat (messages)))
        (say 'marks_after_run (vconcat (marks)))
        (eglot-shutdown server)))
  (error (say 'error (format "%S" err))))

(with-temp-file (getenv "RUNFIX_EGLOT_REPORT")
  (insert (json-encode report)))
(kill-emacs 0)
