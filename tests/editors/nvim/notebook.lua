-- Headless Neovim on a Jupyter notebook (issue 49, 4): `edit NB.ipynb` gives percent text,
-- the server runs it as any Python buffer (a result, an error on the right line), the
-- error's quick fix ("Add `import math`") is applied from the code-action menu and the
-- notebook runs clean, and `:w` writes the notebook back through runfix. Writes
-- $RUNFIX_NVIM_REPORT as JSON.
local harness = dofile(debug.getinfo(1, "S").source:sub(2):match("(.*/)") .. "harness.lua")

harness.run(function(report)
  local runfix = harness.setup(report, { results = "both" })
  vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("RUNFIX_NVIM_FILE")))
  report.version = tostring(vim.version().major) .. "." .. tostring(vim.version().minor)
  report.filetype = vim.bo.filetype
  report.lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  report.attached = vim.wait(20000, function()
    return runfix.client(0) ~= nil
  end, 50)
  local function errors()
    return vim.diagnostic.get(0, { severity = vim.diagnostic.severity.ERROR })
  end
  local function diagnostics()
    return vim.tbl_map(function(d)
      return { line = d.lnum, message = d.message }
    end, vim.diagnostic.get(0))
  end
  runfix.run()
  report.ran = vim.wait(60000, function()
    return #errors() > 0
  end, 50)
  report.diagnostics = diagnostics()

  -- The quick fix, as a user picks it from the code-action menu on the error's line.
  vim.api.nvim_win_set_cursor(0, { errors()[1].lnum + 1, 0 })
  harness.quick_fix("Add `import math`")
  report.fixed = vim.wait(20000, function()
    return vim.tbl_contains(vim.api.nvim_buf_get_lines(0, 0, -1, false), "import math")
  end, 50)
  report.fixed_text = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  runfix.run()
  report.clean = vim.wait(60000, function()
    for _, d in ipairs(vim.diagnostic.get(0)) do
      if d.message:find("3.46", 1, true) then
        return #errors() == 0
      end
    end
    return false
  end, 50)
  report.after = diagnostics()
  -- an edit (a new line in the first code cell), then :w
  for i, line in ipairs(vim.api.nvim_buf_get_lines(0, 0, -1, false)) do
    if line == "prices = [3, 4, 5]" then
      vim.api.nvim_buf_set_lines(0, i, i, false, { "extra = 1" })
      break
    end
  end
  vim.cmd("write")
  report.modified = vim.bo.modified
end)
