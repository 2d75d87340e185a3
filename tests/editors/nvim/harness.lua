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
  M.setup(report, vim.fn.json_decode(os.getenv("RUNFIX_NVIM_SETTINGS")))
  vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("RUNFIX_NVIM_FILE")))
  vim.bo.filetype = "python"
  return vim.wait(20000, function()
    return require("runfix").client(0) ~= nil
  end, 50)
end

--- The plugin set up with `settings` (the interpreter added), every message kept in
--- `report.notes`; the plugin's module. The script opens its files itself.
function M.setup(report, settings)
  report.notes = report.notes or {}
  vim.notify = function(message)
    table.insert(report.notes, message)
  end
  vim.opt.runtimepath:prepend(os.getenv("RUNFIX_NVIM_PLUGIN"))
  local runfix = require("runfix")
  runfix.setup({
    cmd = vim.fn.json_decode(os.getenv("RUNFIX_NVIM_CMD")),
    settings = vim.tbl_extend("force", { python = os.getenv("RUNFIX_NVIM_PYTHON") }, settings or {}),
  })
  return runfix
end

--- The quick fix whose title holds `title`, picked from the code-action menu on the cursor's
--- line as a user picks it; the titles offered (filled in when the menu is shown).
function M.quick_fix(title)
  local offered = {}
  vim.ui.select = function(items, opts, on_choice)
    for _, item in ipairs(items) do
      local shown = opts.format_item(item)
      offered[#offered + 1] = shown
      if shown:find(title, 1, true) then
        return on_choice(item)
      end
    end
    on_choice(nil)
  end
  vim.lsp.buf.code_action({ only = { "quickfix" } })
  return offered
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
