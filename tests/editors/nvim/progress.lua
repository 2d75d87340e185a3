-- Headless Neovim test (issue 46): while Run and fix waits for the model, the echo area says
-- what runfix is doing and for how long; every outcome ends with a message ("fixed on
-- attempt 1", and "nothing to fix" on a clean cell). Writes $RUNFIX_NVIM_REPORT.
local harness = dofile(debug.getinfo(1, "S").source:sub(2):match("(.*/)") .. "harness.lua")

harness.run(function(report)
  report.echoes = {}
  local echo = vim.api.nvim_echo
  vim.api.nvim_echo = function(chunks, history, opts)
    table.insert(report.echoes, chunks[1] and chunks[1][1] or "")
    return echo(chunks, history, opts)
  end
  report.attached = harness.open_with_model(report)
  local function said(text)
    return harness.said(report, text)
  end
  vim.api.nvim_win_set_cursor(0, { 3, 0 }) -- the failing cell
  vim.cmd("RunfixRunAndFix")
  report.fixed = vim.wait(60000, function() return said("fixed") end, 50)
  vim.api.nvim_win_set_cursor(0, { 1, 0 }) -- a clean cell
  vim.cmd("RunfixRunAndFix")
  report.clean = vim.wait(30000, function() return said("nothing to fix") end, 50)
  report.text = vim.api.nvim_buf_get_lines(0, 0, -1, false)
end)
