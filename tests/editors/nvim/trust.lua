-- Headless Neovim test: a folder runfix was not told to trust (a hostile repository's).
-- Opening a file starts nothing; :RunfixRun asks through vim.ui.select (answered here a
-- moment later, as a picker would) and "Use runfix's own Python" runs the file without the
-- folder's interpreter. The result shows as a diagnostic (0.7) or an inlay hint (0.10+).
-- Writes $RUNFIX_NVIM_REPORT as JSON (tests/test_nvim.py asserts).
local harness = dofile(debug.getinfo(1, "S").source:sub(2):match("(.*/)") .. "harness.lua")

local function results()
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(0)) do
    out[#out + 1] = d.message
  end
  if vim.lsp.inlay_hint and vim.lsp.inlay_hint.get then
    for _, item in ipairs(vim.lsp.inlay_hint.get({ bufnr = 0 })) do
      local label = item.inlay_hint.label
      if type(label) == "table" then
        label = table.concat(vim.tbl_map(function(part) return part.value end, label))
      end
      out[#out + 1] = label
    end
  end
  return out
end

harness.run(function(report)
  vim.opt.runtimepath:prepend(os.getenv("RUNFIX_NVIM_PLUGIN"))
  report.version = tostring(vim.version())
  report.questions = {}
  vim.ui.select = function(items, opts, on_choice)
    local titles = {}
    for _, item in ipairs(items) do
      titles[#titles + 1] = opts.format_item(item)
    end
    report.questions[#report.questions + 1] = { prompt = opts.prompt, choices = titles }
    vim.defer_fn(function()
      for _, item in ipairs(items) do
        if item.title == "Use runfix's own Python" then
          return on_choice(item)
        end
      end
      on_choice(nil)
    end, 200)
  end
  require("runfix").setup({ cmd = vim.fn.json_decode(os.getenv("RUNFIX_NVIM_CMD")) })
  vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("RUNFIX_NVIM_FILE")))
  vim.bo.filetype = "python"
  report.attached = vim.wait(20000, function()
    return require("runfix").client(0) ~= nil
  end, 50)
  vim.wait(1500) -- a kernel that was going to start on open would have by now
  report.marks_before_run = vim.fn.readdir(os.getenv("RUNFIX_NVIM_MARKS"))
  vim.cmd("RunfixRun")
  report.ran = vim.wait(60000, function()
    for _, text in ipairs(results()) do
      if text:find("→ 42", 1, true) then
        return true
      end
    end
    return false
  end, 50)
  report.results = results()
end)
