-- Headless Neovim test (issue 59): Run and fix where the model's only candidate silences the
-- error: nothing changes in the buffer, and the message holds the rule and the candidate as
-- a diff to apply by hand; then a real fix, whose message says what the code now prints.
-- Writes $RUNFIX_NVIM_REPORT.
local harness = dofile(debug.getinfo(1, "S").source:sub(2):match("(.*/)") .. "harness.lua")

harness.run(function(report)
  report.attached = harness.open_with_model(report)
  local function said(text)
    return harness.said(report, text)
  end
  vim.api.nvim_win_set_cursor(0, { 3, 0 }) -- the failing cell
  vim.cmd("RunfixRunAndFix")
  report.held = vim.wait(60000, function() return said("not applied") end, 50)
  report.held_text = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  vim.cmd("RunfixRunAndFix")
  report.fixed = vim.wait(60000, function() return said("fixed on attempt") end, 50)
  report.text = vim.api.nvim_buf_get_lines(0, 0, -1, false)
end)
