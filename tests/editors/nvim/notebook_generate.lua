-- Headless Neovim on a notebook with a table, a plot, a print and a prompt cell (issue 70,
-- 5): run it all, Generate! the prompt (its body is written and run), `:w`. The saved
-- notebook is compared with nbclient's by tests/test_nvim.py. Writes $RUNFIX_NVIM_REPORT.
local harness = dofile(debug.getinfo(1, "S").source:sub(2):match("(.*/)") .. "harness.lua")

harness.run(function(report)
  local runfix = harness.setup(report, vim.fn.json_decode(os.getenv("RUNFIX_NVIM_SETTINGS")))
  vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("RUNFIX_NVIM_FILE")))
  report.attached = vim.wait(20000, function()
    return runfix.client(0) ~= nil
  end, 50)
  local function shown(text)
    for _, d in ipairs(vim.diagnostic.get(0)) do
      if d.message:find(text, 1, true) then
        return true
      end
    end
    return false
  end
  runfix.run()
  report.ran = vim.wait(60000, function()
    return shown("printed here")
  end, 50)
  for i, line in ipairs(vim.api.nvim_buf_get_lines(0, 0, -1, false)) do
    if line:find("# ai:", 1, true) then
      vim.api.nvim_win_set_cursor(0, { i, 0 })
    end
  end
  vim.cmd("RunfixGenerate!")
  report.generated = vim.wait(60000, function()
    return shown("rows: 3")
  end, 50)
  vim.cmd("write")
  report.modified = vim.bo.modified
  report.lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
end)
