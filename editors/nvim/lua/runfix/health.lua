-- :checkhealth runfix — the command, its version, the executor in use, and nvim-dap.
local M = {}

-- vim.health.start/ok/warn/error on 0.10+, vim.health.report_* on 0.8–0.9, `health` on 0.7.
local health = vim.health or require("health")
local start = health.start or health.report_start
local ok = health.ok or health.report_ok
local warn = health.warn or health.report_warn
local error = health.error or health.report_error
local info = health.info or health.report_info

function M.check()
  local runfix = require("runfix")
  start("runfix")
  local cmd = runfix.config.cmd
  local exe = cmd[1]
  if vim.fn.executable(exe) ~= 1 then
    error("`" .. exe .. "` is not executable", {
      "install runfix: pip install runfix-lsp (or use the project's .venv)",
      "or set cmd in require('runfix').setup({ cmd = { '/path/to/runfix', 'serve' } })",
    })
    return
  end
  ok("command: " .. table.concat(cmd, " ") .. " (" .. vim.fn.exepath(exe) .. ")")
  local version_cmd = {} -- `runfix serve …` → `runfix --version`
  for _, part in ipairs(cmd) do
    if part == "serve" then
      break
    end
    table.insert(version_cmd, part)
  end
  table.insert(version_cmd, "--version")
  local version = vim.fn.system(version_cmd)
  if vim.v.shell_error == 0 then
    ok("version: " .. vim.trim(version))
  else
    warn("`" .. table.concat(version_cmd, " ") .. "` failed: " .. vim.trim(version))
  end
  local executor = (runfix.config.settings or {}).executor or "kernel"
  info("executor (setting): " .. executor)
  local client = runfix.client(0)
  if client == nil then
    info("not attached to the current buffer")
  else
    ok("attached: " .. runfix.status(0))
  end
  if vim.fn.has("nvim-0.10") == 0 then
    info("results come as Information diagnostics (inlay hints need Neovim 0.10+)")
  end
  local has_dap = pcall(require, "dap")
  if has_dap then
    ok("nvim-dap: found (:RunfixDebugCell, :RunfixDebugError debug in the kernel)")
  else
    info("nvim-dap: not found (github.com/mfussenegger/nvim-dap): :RunfixDebugCell and :RunfixDebugError need it; the rest works without")
  end
end

return M
