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

--- The plugin set up with the test's settings ($RUNFIX_NVIM_SETTINGS: a scripted model's),
--- every message kept in `report.notes` (not shown: no hit-enter prompt headless), the
--- test's file opened as Python; whether the server attached.
function M.open_with_model(report)
  report.notes = report.notes or {}
  vim.notify = function(message)
    table.insert(report.notes, message)
  end
  vim.opt.runtimepath:prepend(os.getenv("RUNFIX_NVIM_PLUGIN"))
  local settings = { python = os.getenv("RUNFIX_NVIM_PYTHON") }
  settings = vim.tbl_extend("force", settings, vim.fn.json_decode(os.getenv("RUNFIX_NVIM_SETTINGS")))
  require("runfix").setup({ cmd = vim.fn.json_decode(os.getenv("RUNFIX_NVIM_CMD")), settings = settings })
  vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("RUNFIX_NVIM_FILE")))
  vim.bo.filetype = "python"
  return vim.wait(20000, function()
    return require("runfix").client(0) ~= nil
  end, 50)
end

--- Whether a kept message holds `text`.
function M.said(report, text)
  for _, note in ipairs(report.notes) do
    if note:find(text, 1, true) then
      return true
    end
  end
  return false
end

return M
