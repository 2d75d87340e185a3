-- Headless Neovim test: run a file whose cells show a DataFrame and a plot, then :RunfixOutput
-- on the DataFrame's line opens a float with its table, and `o` in it asks for the rich view
-- in the browser (vim.ui.open is replaced here to catch the address). Writes the report.
local harness = dofile(debug.getinfo(1, "S").source:sub(2):match("(.*/)") .. "harness.lua")

harness.run(function(report)
  report.opened = {}
  vim.ui.open = function(url)
    table.insert(report.opened, url)
    return { wait = function() return { code = 0 } end }
  end
  local runfix = harness.open(report)
  report.attached = vim.wait(20000, function()
    return runfix.client(0) ~= nil
  end, 50)
  local done = false
  local client = runfix.client(0)
  client.request("workspace/executeCommand", {
    command = "runfix.run",
    arguments = { { uri = vim.uri_from_bufnr(0) } },
  }, function(_, result)
    report.status = result and result.status
    done = true
  end, 0)
  report.ran = vim.wait(90000, function()
    return done
  end, 50)
  vim.api.nvim_win_set_cursor(0, { 4, 0 }) -- the DataFrame's line
  vim.cmd("RunfixOutput")
  report.float = vim.wait(20000, function()
    return runfix.last_output ~= nil
  end, 50)
  local shown = runfix.last_output
  report.lines = shown.lines
  report.floating = vim.api.nvim_win_get_config(shown.win).relative ~= ""
  vim.api.nvim_set_current_win(shown.win)
  vim.api.nvim_feedkeys("o", "x", false)
  vim.wait(10000, function()
    return #report.opened > 0
  end, 50)
  -- :RunfixHistory: the runs in the quickfix list (from the source buffer).
  vim.api.nvim_set_current_win(vim.fn.win_getid(vim.fn.bufwinnr(os.getenv("RUNFIX_NVIM_FILE"))))
  vim.cmd("RunfixHistory")
  vim.wait(10000, function()
    return #vim.fn.getqflist() > 0
  end, 50)
  report.history = {}
  for _, item in ipairs(vim.fn.getqflist()) do
    table.insert(report.history, { lnum = item.lnum, type = item.type, text = item.text })
  end
end)
