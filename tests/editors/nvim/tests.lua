-- Headless Neovim on a project's tests (issue 50): the module open, then the test file;
-- :RunfixTest runs the file's tests; each failure is an error diagnostic on the test's
-- line, and the one raised in the module also on the module's line. Writes
-- $RUNFIX_NVIM_REPORT as JSON.
local harness = dofile(debug.getinfo(1, "S").source:sub(2):match("(.*/)") .. "harness.lua")

harness.run(function(report)
  local runfix = harness.setup(report)
  vim.o.hidden = true -- (0.7's default is off: the module's buffer would be unloaded)
  vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("RUNFIX_NVIM_MODULE")))
  local module = vim.api.nvim_get_current_buf()
  vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("RUNFIX_NVIM_FILE")))
  local tests = vim.api.nvim_get_current_buf()
  report.version = tostring(vim.version().major) .. "." .. tostring(vim.version().minor)
  report.attached = vim.wait(20000, function()
    return runfix.client(tests) ~= nil and runfix.client(module) ~= nil
  end, 50)
  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  vim.cmd("RunfixTest")
  local function errors(buf)
    return vim.tbl_map(function(d)
      return { line = d.lnum, message = d.message }
    end, vim.diagnostic.get(buf, { severity = vim.diagnostic.severity.ERROR }))
  end
  report.ran = vim.wait(60000, function()
    return #errors(tests) == 2 and #errors(module) == 1
  end, 50)
  report.tests = errors(tests)
  report.module = errors(module)
end)
