-- Headless Neovim test: a cell calls input(); the plugin asks through vim.ui.input (answered
-- here as a user would type it) and the answer reaches the code. Writes $RUNFIX_NVIM_REPORT.
local harness = dofile(debug.getinfo(1, "S").source:sub(2):match("(.*/)") .. "harness.lua")

harness.run(function(report)
  vim.opt.runtimepath:prepend(os.getenv("RUNFIX_NVIM_PLUGIN"))
  report.prompts = {}
  vim.ui.input = function(opts, on_confirm)
    table.insert(report.prompts, opts.prompt)
    vim.defer_fn(function()
      on_confirm("Ada") -- a moment later, as an asynchronous input UI would
    end, 200)
  end
  require("runfix").setup({
    cmd = vim.fn.json_decode(os.getenv("RUNFIX_NVIM_CMD")),
    settings = { python = os.getenv("RUNFIX_NVIM_PYTHON") },
  })
  vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("RUNFIX_NVIM_FILE")))
  vim.bo.filetype = "python"
  report.attached = vim.wait(20000, function()
    return require("runfix").client(0) ~= nil
  end, 50)
  vim.cmd("RunfixRun")
  report.answered = vim.wait(60000, function()
    for _, d in ipairs(vim.diagnostic.get(0)) do
      if d.message:find("Hello, Ada", 1, true) then
        return true
      end
    end
    return false
  end, 50)
  report.diagnostics = {}
  for _, d in ipairs(vim.diagnostic.get(0)) do
    table.insert(report.diagnostics, d.message)
  end
end)
