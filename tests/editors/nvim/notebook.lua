-- Headless Neovim on a Jupyter notebook (issue 49, 4): `edit NB.ipynb` gives percent text,
-- the server runs it as any Python buffer (a result, an error on the right line), and `:w`
-- writes the notebook back through runfix. Writes $RUNFIX_NVIM_REPORT as JSON.
local harness = dofile(debug.getinfo(1, "S").source:sub(2):match("(.*/)") .. "harness.lua")

harness.run(function(report)
  report.notes = {}
  vim.notify = function(message)
    table.insert(report.notes, message)
  end
  vim.opt.runtimepath:prepend(os.getenv("RUNFIX_NVIM_PLUGIN"))
  local runfix = require("runfix")
  runfix.setup({
    cmd = vim.fn.json_decode(os.getenv("RUNFIX_NVIM_CMD")),
    settings = { python = os.getenv("RUNFIX_NVIM_PYTHON"), results = "both" },
  })
  vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("RUNFIX_NVIM_FILE")))
  report.version = tostring(vim.version().major) .. "." .. tostring(vim.version().minor)
  report.filetype = vim.bo.filetype
  report.lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  report.attached = vim.wait(20000, function()
    return runfix.client(0) ~= nil
  end, 50)
  runfix.run()
  report.ran = vim.wait(60000, function()
    for _, d in ipairs(vim.diagnostic.get(0)) do
      if d.message:find("NameError", 1, true) then
        return true
      end
    end
    return false
  end, 50)
  report.diagnostics = vim.tbl_map(function(d)
    return { line = d.lnum, message = d.message }
  end, vim.diagnostic.get(0))
  -- an edit (a new line in the first code cell), then :w
  vim.api.nvim_buf_set_lines(0, 5, 5, false, { "extra = 1" })
  vim.cmd("write")
  report.modified = vim.bo.modified
end)
