-- Headless Neovim test (issue 46): while Run and fix waits for the model, the echo area says
-- what runfix is doing and for how long; every outcome ends with a message ("fixed on
-- attempt 1", and "nothing to fix" on a clean cell). Writes $RUNFIX_NVIM_REPORT.
local harness = dofile(debug.getinfo(1, "S").source:sub(2):match("(.*/)") .. "harness.lua")

harness.run(function(report)
  report.notes, report.echoes = {}, {}
  vim.notify = function(message)
    table.insert(report.notes, message)
  end
  local echo = vim.api.nvim_echo
  vim.api.nvim_echo = function(chunks, history, opts)
    table.insert(report.echoes, chunks[1] and chunks[1][1] or "")
    return echo(chunks, history, opts)
  end
  vim.opt.runtimepath:prepend(os.getenv("RUNFIX_NVIM_PLUGIN"))
  local settings = { python = os.getenv("RUNFIX_NVIM_PYTHON") }
  settings = vim.tbl_extend("force", settings, vim.fn.json_decode(os.getenv("RUNFIX_NVIM_SETTINGS")))
  require("runfix").setup({ cmd = vim.fn.json_decode(os.getenv("RUNFIX_NVIM_CMD")), settings = settings })
  vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("RUNFIX_NVIM_FILE")))
  vim.bo.filetype = "python"
  report.attached = vim.wait(20000, function()
    return require("runfix").client(0) ~= nil
  end, 50)
  local function said(text)
    for _, note in ipairs(report.notes) do
      if note:find(text, 1, true) then
        return true
      end
    end
    return false
  end
  vim.api.nvim_win_set_cursor(0, { 3, 0 }) -- the failing cell
  vim.cmd("RunfixRunAndFix")
  report.fixed = vim.wait(60000, function() return said("fixed") end, 50)
  vim.api.nvim_win_set_cursor(0, { 1, 0 }) -- a clean cell
  vim.cmd("RunfixRunAndFix")
  report.clean = vim.wait(30000, function() return said("nothing to fix") end, 50)
  report.text = vim.api.nvim_buf_get_lines(0, 0, -1, false)
end)
