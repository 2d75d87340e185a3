-- Headless Neovim test (issue 46): Generate on the README's prompt (`# %% ai: …`, on a cell
-- marker) writes its body; Generate on a line that is no prompt says so once, with one
-- "runfix:". Writes $RUNFIX_NVIM_REPORT.
local harness = dofile(debug.getinfo(1, "S").source:sub(2):match("(.*/)") .. "harness.lua")

harness.run(function(report)
  report.attached = harness.open_with_model(report)
  local lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  for i, line in ipairs(lines) do
    if line:find("# %% ai:", 1, true) then
      vim.api.nvim_win_set_cursor(0, { i, 0 })
    end
  end
  local before = #lines
  vim.cmd("RunfixGenerate")
  report.generated = vim.wait(60000, function()
    return vim.api.nvim_buf_line_count(0) > before
  end, 50)
  vim.api.nvim_win_set_cursor(0, { 2, 0 }) -- code, not a prompt
  vim.cmd("RunfixGenerate")
  report.said = vim.wait(20000, function() return harness.said(report, "not a prompt") end, 50)
  vim.wait(1500) -- the command's own answer comes too: it must not say it again
  report.text = vim.api.nvim_buf_get_lines(0, 0, -1, false)
end)
