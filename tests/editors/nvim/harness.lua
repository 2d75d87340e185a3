-- What the headless Neovim test scripts share: run the body with a report table, keep an
-- error in it, write it to $RUNFIX_NVIM_REPORT as JSON (tests/test_nvim.py reads it), quit.
local M = {}

function M.run(body)
  local report = {}
  local ok, err = pcall(body, report)
  if not ok then
    report.error = tostring(err)
  end
  local f = assert(io.open(os.getenv("RUNFIX_NVIM_REPORT"), "w"))
  f:write(vim.fn.json_encode(report))
  f:close()
  vim.cmd("qall!")
end

--- The plugin set up as a user's init.lua does, the test's file opened as Python; the
--- plugin's module (and Neovim's version in the report).
function M.open(report)
  vim.opt.runtimepath:prepend(os.getenv("RUNFIX_NVIM_PLUGIN"))
  local runfix = require("runfix")
  runfix.setup({
    cmd = vim.fn.json_decode(os.getenv("RUNFIX_NVIM_CMD")),
    settings = { python = os.getenv("RUNFIX_NVIM_PYTHON") },
  })
  vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("RUNFIX_NVIM_FILE")))
  vim.bo.filetype = "python"
  report.version = tostring(vim.version().major) .. "." .. tostring(vim.version().minor)
  return runfix
end

return M
