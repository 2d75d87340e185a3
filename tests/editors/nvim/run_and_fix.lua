-- Headless Neovim test: open the example with the plugin, :RunfixRun, read the
-- diagnostics, apply the "Add `import math`" quick fix through vim.lsp.buf.code_action,
-- and write what happened to $RUNFIX_NVIM_REPORT as JSON (tests/test_nvim.py asserts).
local harness = dofile(debug.getinfo(1, "S").source:sub(2):match("(.*/)") .. "harness.lua")

harness.run(function(report)
  report.steps = {}
  local function step(name, value)
    report.steps[#report.steps + 1] = name
    report[name] = value
  end
  vim.opt.runtimepath:prepend(os.getenv("RUNFIX_NVIM_PLUGIN"))
  local settings = { python = os.getenv("RUNFIX_NVIM_PYTHON") }
  if (os.getenv("RUNFIX_NVIM_SETTINGS") or "") ~= "" then -- more, as JSON (a remote kernel's)
    settings = vim.tbl_extend("force", settings, vim.fn.json_decode(os.getenv("RUNFIX_NVIM_SETTINGS")))
  end
  require("runfix").setup({
    cmd = vim.fn.json_decode(os.getenv("RUNFIX_NVIM_CMD")),
    settings = settings,
  })
  vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("RUNFIX_NVIM_FILE")))
  vim.cmd("filetype on")
  vim.bo.filetype = "python"
  step("attached", vim.wait(20000, function()
    return require("runfix").client(0) ~= nil
  end, 50))

  local function diagnostics()
    local out = {}
    for _, d in ipairs(vim.diagnostic.get(0)) do
      out[#out + 1] = { line = d.lnum, severity = d.severity, message = d.message }
    end
    table.sort(out, function(a, b) return a.line < b.line end)
    return out
  end
  local function has_error()
    for _, d in ipairs(vim.diagnostic.get(0)) do
      if d.severity == vim.diagnostic.severity.ERROR then
        return true
      end
    end
    return false
  end

  vim.cmd("RunfixRun")
  step("errored", vim.wait(60000, has_error, 50))
  step("diagnostics", diagnostics())

  -- The quick fix, as a user picks it from the code-action menu on the error's line.
  local error_line
  for _, d in ipairs(vim.diagnostic.get(0, { severity = vim.diagnostic.severity.ERROR })) do
    error_line = d.lnum
  end
  vim.api.nvim_win_set_cursor(0, { error_line + 1, 0 })
  local offered = harness.quick_fix("Add `import math`")
  step("fixed", vim.wait(20000, function()
    return vim.tbl_contains(vim.api.nvim_buf_get_lines(0, 0, -1, false), "import math")
  end, 50))
  step("offered", offered)
  step("text", vim.api.nvim_buf_get_lines(0, 0, -1, false))

  vim.cmd("RunfixRun")
  step("clean", vim.wait(60000, function()
    return not has_error() and #vim.diagnostic.get(0) >= 2
  end, 50))
  step("after", diagnostics())
  step("status", require("runfix").status(0))
  vim.cmd("checkhealth runfix")
  step("health", vim.api.nvim_buf_get_lines(0, 0, -1, false))
end)
